/* util_hash_test.c: util/hash.h's contract: when uthash cannot allocate while adding (its table,
 * its buckets), the element stays out, HASH_ADDED says so, the process goes on and the table keeps
 * what it had. Allocation failures are injected through uthash_malloc. */
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

int main(void)
{
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
