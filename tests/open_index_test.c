/* open_index_test.c: the open-addressing index (util/open_index.h). Worked cases first, on hashes
 * chosen to land in given slots of the first, 64-slot table (home = hash >> 58): a probe run that
 * collides, a removal in its middle (the later entries shift back, one that sits at its home stays), a run
 * across the table's wrap, hashes shared by two items, and growth past a quarter full (every item found after),
 * or past half full in a large table.
 * Then random inserts and removes of 64-bit ids against a brute-force array model, checking every id's
 * presence and item after each step and the table's count. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util/open_index.h"

/* A hash whose home in a 64-slot table is slot `home`; low bits tell hashes of one home apart. */
static uint64_t at_home(unsigned home, unsigned tag)
{
    return (uint64_t)home << 58 | tag;
}

static int items[4096]; /* their addresses are the items */

static ptrdiff_t slot_of(const struct open_index *x, uint64_t h)
{
    return open_index_first(x, h);
}

static void worked_cases(void)
{
    struct open_index x = {0};
    ok(open_index_first(&x, 5) < 0 && open_index_get(&x, 5) == NULL && open_index_remove(&x, 5) == NULL,
       "an empty index (nothing allocated) finds nothing and removes nothing");

    /* a run from slot 10: A, B (both home 10), C (home 11), D (home 13, at its home) */
    uint64_t A = at_home(10, 1), B = at_home(10, 2), C = at_home(11, 3), D = at_home(13, 4);
    open_index_insert(&x, A, &items[0]);
    open_index_insert(&x, B, &items[1]);
    open_index_insert(&x, C, &items[2]);
    open_index_insert(&x, D, &items[3]);
    is_int(x.mask + 1, 64, "the first table has 64 slots");
    ok(slot_of(&x, A) == 10 && slot_of(&x, B) == 11 && slot_of(&x, C) == 12 && slot_of(&x, D) == 13,
       "colliding hashes probe on: A at 10, B at 11, C (home 11) at 12, D at its home 13");
    ok(open_index_remove(&x, A) == &items[0], "removing A returns its item");
    ok(slot_of(&x, A) < 0 && slot_of(&x, B) == 10 && slot_of(&x, C) == 11 && slot_of(&x, D) == 13,
       "backward shift: B moves to 10, C to 11, D stays at its home");
    ok(x.slots[12].item == NULL && x.count == 3, "slot 12 is empty again (no tombstone), 3 items");

    /* across the wrap: E, F, G all home 63 sit at 63, 0, 1 */
    uint64_t E = at_home(63, 5), F = at_home(63, 6), G = at_home(63, 7), H = at_home(0, 8);
    open_index_insert(&x, E, &items[4]);
    open_index_insert(&x, F, &items[5]);
    open_index_insert(&x, G, &items[6]);
    open_index_insert(&x, H, &items[7]);
    ok(slot_of(&x, E) == 63 && slot_of(&x, F) == 0 && slot_of(&x, G) == 1 && slot_of(&x, H) == 2,
       "a run wraps: E 63, F 0, G 1, H (home 0) 2");
    open_index_remove(&x, E);
    ok(slot_of(&x, F) == 63 && slot_of(&x, G) == 0 && slot_of(&x, H) == 1 && x.slots[2].item == NULL,
       "removing E shifts F and G back across the wrap, and H (home 0) to 1");
    open_index_remove(&x, F);
    ok(slot_of(&x, G) == 63 && slot_of(&x, H) == 0,
       "removing F at 63: G (home 63) moves to 63, H to its home 0");

    /* two items under one hash: both reachable with open_index_next, removal of the first keeps the second */
    uint64_t S = at_home(30, 9);
    open_index_insert(&x, S, &items[8]);
    open_index_insert(&x, S, &items[9]);
    ptrdiff_t i = open_index_first(&x, S), j = open_index_next(&x, S, ((size_t)i + 1) & x.mask);
    ok(i == 30 && j == 31 && x.slots[i].item == &items[8] && x.slots[j].item == &items[9] &&
           open_index_next(&x, S, ((size_t)j + 1) & x.mask) < 0,
       "a shared hash: the first item at 30, the second at 31, then no more");
    open_index_remove_at(&x, (size_t)i);
    ok(open_index_first(&x, S) == 30 && x.slots[30].item == &items[9], "removing the first leaves the second, shifted");
    open_index_remove_at(&x, 30);
    is_int(x.count, 5, "5 items left (B, C, D, G, H)");

    /* growth: inserting the 17th item of 64 slots doubles the table; everything stays findable */
    size_t before = x.count;
    for (unsigned k = 0; x.count < 16; k++)
        open_index_insert(&x, open_index_hash_u64(1000 + k), &items[100 + k]);
    is_int(x.mask + 1, 64, "16 items fit in 64 slots (a quarter full)");
    open_index_insert(&x, open_index_hash_u64(5000), &items[99]);
    is_int(x.mask + 1, 128, "the 17th doubles the table to 128 slots");
    size_t found = 0;
    for (unsigned k = 0; k < 16 - before; k++)
        found += open_index_get(&x, open_index_hash_u64(1000 + k)) == &items[100 + k];
    found += open_index_get(&x, B) == &items[1] && open_index_get(&x, C) == &items[2] &&
             open_index_get(&x, D) == &items[3] && open_index_get(&x, G) == &items[6] &&
             open_index_get(&x, H) == &items[7] && open_index_get(&x, open_index_hash_u64(5000)) == &items[99];
    is_int(found, 16 - before + 1, "after growing, every item is found under its hash");
    open_index_free(&x);
    ok(x.slots == NULL && x.count == 0 && open_index_get(&x, B) == NULL, "freed: empty again");
}

#define IDS 2000

static void random_model(bool packed)
{
    struct open_index x = {.packed = packed};
    static bool live[IDS];
    memset(live, 0, sizeof live);
    size_t nlive = 0, bad = 0, max_slots = 0, max_live = 0;
    uint64_t rng = 7;
    for (int step = 0; step < 200000; step++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        /* phases of growth and shrinkage: ids from a window that widens then narrows */
        size_t window = step < 100000 ? 16 + (size_t)step * (IDS - 16) / 100000 : IDS - (size_t)(step - 100000) * (IDS - 16) / 100000;
        size_t id = (size_t)(rng >> 33) % window;
        /* ids as a trace gives them and as addresses (multiples of 512), to stress the top bits */
        uint64_t key = id % 2 ? (uint64_t)id : (uint64_t)id << 9 | UINT64_C(1) << 40;
        uint64_t h = open_index_hash_u64(key);
        void *got = open_index_get(&x, h);
        if ((got != NULL) != live[id] || (got && got != &items[id])) {
            bad++;
            continue;
        }
        if (got) {
            bad += open_index_remove(&x, h) != &items[id];
            live[id] = false;
            nlive--;
        } else if (open_index_insert(&x, h, &items[id]) == 0) {
            live[id] = true;
            nlive++;
        }
        bool dense = x.mask + 1 >= OPEN_INDEX_DENSE_SLOTS;
        bad += x.count != nlive || (dense && packed ? 4 * x.count > 3 * (x.mask + 1)
                                                    : (dense ? 2 : 4) * x.count > x.mask + 1);
        if (nlive > max_live)
            max_live = nlive;
        if (x.mask + 1 > max_slots)
            max_slots = x.mask + 1;
        if (step % 20000 == 0) { /* every id against the model */
            for (size_t k = 0; k < IDS; k++) {
                uint64_t kk = k % 2 ? (uint64_t)k : (uint64_t)k << 9 | UINT64_C(1) << 40;
                void *g = open_index_get(&x, open_index_hash_u64(kk));
                bad += live[k] ? g != &items[k] : g != NULL;
            }
        }
    }
    is_int(bad, 0, "%s200000 random inserts and removes: every lookup, removal and count agrees with the model, never "
                   "over a quarter full (%s in a table of OPEN_INDEX_DENSE_SLOTS or more)", packed ? "packed: " : "",
           packed ? "three quarters" : "half");
    ok(max_slots <= 8 * max_live, "the table stays within eight slots per id live at its most (%zu slots, %zu ids)",
       max_slots, max_live);
    size_t empty_probe = 0;
    for (size_t i = 0; i <= x.mask; i++)
        empty_probe += x.slots[i].item == NULL;
    is_int(empty_probe, x.mask + 1 - x.count, "no slot is held but by a live item (no tombstones)");
    open_index_free(&x);
}

static int many[3073];

/* Inserts ids from the count held up to n, then tells whether the table has `slots`. */
static void fill_to(struct open_index *x, unsigned n, size_t slots, const char *what)
{
    for (unsigned k = (unsigned)x->count; k < n; k++)
        open_index_insert(x, open_index_hash_u64(k), &many[k]);
    is_int(x->mask + 1, slots, "%s", what);
}

/* One id more than the n held: the table has `slots`, and every item is found. */
static void one_more(struct open_index *x, unsigned n, size_t slots, const char *what)
{
    open_index_insert(x, open_index_hash_u64(n), &many[n]);
    size_t found = 0;
    for (unsigned k = 0; k <= n; k++)
        found += open_index_get(x, open_index_hash_u64(k)) == &many[k];
    ok(x->mask + 1 == slots && found == n + 1, "%s, every item found (%zu)", what, found);
}

/* A small table fills to a quarter, a large one to half: 2048 slots hold 512 items, the 513th doubles them
 * to 4096 slots, which hold 2048; the 2049th doubles them to 8192. Packed, a large table fills to three
 * quarters: 4096 slots hold 3072 items, the 3073rd doubles them; freed, the index stays packed. */
static void growth(void)
{
    struct open_index x = {0};
    fill_to(&x, 512, 2048, "512 items in 2048 slots (a quarter full)");
    fill_to(&x, 2048, OPEN_INDEX_DENSE_SLOTS, "the 513th to the 2048th in 4096 slots (half full)");
    one_more(&x, 2048, 8192, "the 2049th doubles them to 8192");
    open_index_free(&x);
    x.packed = true;
    fill_to(&x, 3072, OPEN_INDEX_DENSE_SLOTS, "packed: 3072 items in 4096 slots (three quarters full)");
    one_more(&x, 3072, 8192, "the 3073rd doubles them to 8192");
    open_index_free(&x);
    ok(x.packed && !x.slots, "freed, the index is empty and still packed");
}

int main(void)
{
    worked_cases();
    random_model(false);
    random_model(true);
    growth();
    return done_testing();
}
