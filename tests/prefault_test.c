/* prefault_test.c: util/prefault.h: prefault makes the whole pages of a range resident before any touch
 * (on a kernel with MADV_POPULATE_WRITE) and leaves the partial pages at its ends alone, keeping what the
 * pages hold; prefault_fresh tells untouched memory by its last whole page; prefault_calloc gives zeroed
 * memory, small and large, over memory used before. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"
#include "util/prefault.h"

static size_t resident(const void *p, size_t pages, size_t page)
{
    unsigned char v[16];
    size_t count = 0;
    if (pages > sizeof v || mincore((void *)p, pages * page, v) != 0)
        return (size_t)-1;
    for (size_t i = 0; i < pages; i++)
        count += v[i] & 1;
    return count;
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

int main(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *m = mmap(NULL, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        tap_skip_all("no anonymous mapping");
    const int populates = madvise(m + 7 * page, page, MADV_POPULATE_WRITE) == 0; /* the last page: a probe */
    is_u64(resident(m, 7, page), 0, "a fresh mapping: nothing resident");
    prefault(m + page / 2, 5 * page); /* whole pages 1 to 4; pages 0 and 5 only in part */
    if (populates) {
        is_u64(resident(m + page, 4, page), 4, "the whole pages within the range are resident");
        is_u64(resident(m, 1, page) + resident(m + 5 * page, 1, page), 0, "the partial pages at its ends are not");
    } else {
        ok(1, "# SKIP MADV_POPULATE_WRITE unsupported by this kernel");
        ok(1, "# SKIP MADV_POPULATE_WRITE unsupported by this kernel");
    }
    ok(all_zero(m, 8 * page), "the pages read as zeros");
    m[2 * page] = 7;
    prefault(m, 8 * page);
    is_int(m[2 * page], 7, "a resident page keeps its contents");
    prefault(m, 0);
    prefault(m + 1, page - 2);
    ok(1, "empty ranges and ranges within one page: nothing to do");
    munmap(m, 8 * page);

    unsigned char *f = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (f == MAP_FAILED)
        tap_skip_all("no anonymous mapping");
    ok(prefault_fresh(f, 4 * page), "untouched memory is fresh");
    f[0] = 1;
    ok(prefault_fresh(f, 4 * page), "its first page touched: still fresh (a neighbour's, at the heap's top)");
    f[3 * page + 5] = 1;
    ok(!prefault_fresh(f, 4 * page), "its last whole page touched: not fresh");
    ok(prefault_fresh(f + 3 * page + 8, page - 16), "no whole page within: taken as fresh");
    munmap(f, 4 * page);

    const size_t sizes[] = {16, 16 * 1024 - 1, 16 * 1024, 100 * 1024 + 8, 512 * 1024};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char *dirty = malloc(sizes[k]); /* memory freed dirty, which a later allocation may reuse */
        if (dirty)
            memset(dirty, 0xa5, sizes[k]);
        free(dirty);
        unsigned char *z = prefault_calloc(sizes[k]);
        ok(z && all_zero(z, sizes[k]), "prefault_calloc(%zu): zeroed", sizes[k]);
        free(z);
    }
    return done_testing();
}
