/* id_map_test.c: the text trace's live-ID table (replay/id_map.h) against a plain array model under
 * churn: IDs added and removed at random (so removals shift probe runs back across the table's wrap),
 * every ID's presence and key checked after each step, long IDs beside short ones, and words that
 * differ only in their length or last byte. */
#include <stdio.h>
#include <string.h>

#include "replay/id_map.h"
#include "tap.h"

#define IDS 3000

static void id_word(size_t i, char *buf, size_t n)
{
    if (i % 7 == 0) /* a long ID, past the recycled records' size */
        snprintf(buf, n, "module.layers.%zu.self_attn.q_proj.weight.grad", i);
    else
        snprintf(buf, n, "t%zu", i);
}

int main(void)
{
    struct id_map m = {0};
    static bool live[IDS];
    static uint64_t keys[IDS];
    uint64_t rng = 42, next_key = 1;
    size_t mismatches = 0, nlive = 0;
    char w[96];
    for (int step = 0; step < 60000; step++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        size_t i = (size_t)(rng >> 33) % IDS;
        id_word(i, w, sizeof w);
        size_t len = strlen(w);
        uint64_t h = id_map_hash(w, len);
        ptrdiff_t at = id_map_find(&m, w, len, h);
        if ((at >= 0) != live[i] || (at >= 0 && id_map_key(&m, at) != keys[i])) {
            mismatches++;
            continue;
        }
        if (at >= 0) {
            id_map_remove(&m, at);
            live[i] = false;
            nlive--;
        } else if (id_map_add(&m, w, len, h, next_key) == 0) {
            keys[i] = next_key++;
            live[i] = true;
            nlive++;
        }
    }
    is_int(mismatches, 0, "60000 random adds and removes: every lookup agrees with the model");
    is_int(m.index.count, nlive, "the table counts the live IDs");
    size_t wrong = 0;
    for (size_t i = 0; i < IDS; i++) {
        id_word(i, w, sizeof w);
        ptrdiff_t at = id_map_find(&m, w, strlen(w), id_map_hash(w, strlen(w)));
        wrong += (at >= 0) != live[i] || (at >= 0 && id_map_key(&m, at) != keys[i]);
    }
    is_int(wrong, 0, "after the churn, each of %d IDs is found exactly when live, with its key", IDS);
    size_t again = 0, kept = 0;
    for (size_t i = 0; i < IDS; i++) { /* adding a live ID adds nothing and keeps its key */
        id_word(i, w, sizeof w);
        size_t len = strlen(w);
        if (!live[i])
            continue;
        again += id_map_add(&m, w, len, id_map_hash(w, len), 999999) == 1;
        kept += id_map_key(&m, id_map_find(&m, w, len, id_map_hash(w, len))) == keys[i];
    }
    ok(again == nlive && kept == nlive && m.index.count == nlive,
       "adding a live ID again says so (1) and leaves its key and the count as they were");
    ok(id_map_same("abcdefgh", "abcdefgh", 8) && !id_map_same("abcdefgh", "abcdXfgh", 8) &&
           !id_map_same("abcdefgh", "Xbcdefgh", 8) && !id_map_same("abcdefgh", "abcdefgX", 8) &&
           id_map_same("abcde", "abcde", 5) && !id_map_same("abcde", "abXde", 5) && id_map_same("ab", "ab", 2) &&
           !id_map_same("ab", "aX", 2) && !id_map_same("abc", "aXc", 3) && !id_map_same("a", "b", 1) &&
           id_map_same("", "", 0) && !id_map_same("abcdefghi", "abcdefghX", 9),
       "same words: every byte of 1 to 9 byte words is compared (first, middle, last)");
    ok(id_map_find(&m, "t1", 1, id_map_hash("t1", 1)) < 0, "a prefix of a live ID is not it");
    ok(id_map_hash("t12", 3) != id_map_hash("t13", 3) && id_map_hash("abcdefgh", 8) != id_map_hash("abcdefgi", 8) &&
           id_map_hash("abcdefghi", 9) != id_map_hash("abcdefghj", 9),
       "words differing in their last byte hash apart (tail, whole word, and a tail after one)");
    id_map_free(&m);
    is_int(m.index.count, 0, "freed");
    return done_testing();
}
