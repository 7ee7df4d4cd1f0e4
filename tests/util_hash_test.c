/* util_hash_test.c: util/hash.h's contract: when uthash cannot allocate while adding (its table,
 * its buckets), the element stays out, HASH_ADDED says so, the process goes on and the table keeps
 * what it had. Allocation failures are injected through uthash_malloc. And hash_bytes: its tail read
 * by overlapping loads hashes as the tail copied into a zeroed word does, at every length and offset. */
#include <stdbool.h>
#include <stdlib.h>

static int allocs_left = -1; /* -1: no limit */

static void *limited_malloc(size_t n)
{
    if (allocs_left == 0)
        return NULL;
    if (allocs_left > 0)
        allocs_left--;
    return malloc(n);
}

#define uthash_malloc(sz) limited_malloc(sz)
#include "tap.h"
#include "util/hash.h"

struct item {
    int key;
    UT_hash_handle hh;
};

/* hash_bytes as first written: the tail copied into a zeroed word. */
static uint64_t reference_hash(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = len * UINT64_C(0x9E3779B97F4A7C15), w;
    for (; len >= 8; len -= 8, s += 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * UINT64_C(0xBF58476D1CE4E5B9);
        h ^= h >> 31;
    }
    w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * UINT64_C(0x94D049BB133111EB);
    return h ^ (h >> 29);
}

static void bytes_hash(void)
{
    is_int((long long)hash_bytes("abc", 3), (long long)UINT64_C(0xf60457839b007a6b), "'abc' hashes as before");
    is_int((long long)hash_bytes("transformer_blocks.*.attn.to_q", 30), (long long)UINT64_C(0xd97acf31692922fb),
           "a folded tag of 30 bytes hashes as before");
    ok(hash_bytes("", 0) == 0, "nothing hashes to 0");
    unsigned char buf[64];
    uint64_t x = 1;
    for (size_t i = 0; i < sizeof buf; i++) { /* bytes of every value, the high bit too */
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        buf[i] = (unsigned char)(x >> 56);
    }
    int wrong = 0;
    for (size_t at = 0; at < 8; at++)
        for (size_t len = 0; at + len <= 48; len++)
            wrong += hash_bytes(buf + at, len) != reference_hash(buf + at, len);
    is_int(wrong, 0, "every length 0-48 at offsets 0-7: the zero-padded tail's hash");
    ok(hash_bytes("ab", 2) != hash_bytes("ab\0", 3) && hash_bytes("a", 1) != hash_bytes("b", 1),
       "a NUL more, another byte: other hashes");
}

int main(void)
{
    bytes_hash();
    struct item *table = NULL, *first = calloc(1, sizeof *first), *found = NULL;
    allocs_left = 0; /* the first add must allocate the table itself */
    first->key = 1;
    HASH_ADD_INT(table, key, first);
    ok(!HASH_ADDED(first) && table == NULL, "the first add without memory for the table leaves it out");
    allocs_left = -1;
    HASH_ADD_INT(table, key, first);
    ok(HASH_ADDED(first) && HASH_COUNT(table) == 1, "with memory it goes in");

    /* fill until a bucket expansion is due, then refuse it */
    struct item *items = calloc(4096, sizeof *items);
    int refused = -1;
    for (int i = 0; i < 4096 && refused < 0; i++) {
        items[i].key = 100 + i;
        allocs_left = 0;
        HASH_ADD_INT(table, key, &items[i]);
        if (!HASH_ADDED(&items[i]))
            refused = i;
    }
    allocs_left = -1;
    ok(refused > 0, "an add that needs more buckets is refused without memory (item %d)", refused);
    is_int(HASH_COUNT(table), (long long)refused + 1, "the table holds everything added before it");
    HASH_FIND_INT(table, &(int){100 + refused}, found);
    ok(found == NULL, "the refused item is not found");
    HASH_FIND_INT(table, &(int){100}, found);
    ok(found == &items[0], "earlier items are still found");
    HASH_CLEAR(hh, table);
    free(items);
    free(first);
    return done_testing();
}
