/* map_array.c: arrays in anonymous mappings, grown by mremap, their pages populated ahead in steps (see
 * map_array.h). */
#define _GNU_SOURCE
#include "workload/map_array.h"

#include <sys/mman.h>
#include <unistd.h>

#define FIRST_BYTES (64 * 1024)
/* Past the first mapping the usable part grows by this much at a time (or to what is needed), populated at
 * once: at most 16 pages populated and never touched, per array. */
#define STEP_BYTES (64 * 1024)

static size_t page_bytes(void)
{
    long n = sysconf(_SC_PAGESIZE);
    return n > 0 ? (size_t)n : 4096;
}

/* The whole pages holding n elements: the usable bytes give cap = bytes / elem back, rounded down, so
 * rounding cap * elem up to the page gives the bytes back when elem is at most a page. */
static size_t usable_bytes(size_t n, size_t elem, size_t page)
{
    return (n * elem + page - 1) / page * page;
}

/* The mapping's length: FIRST_BYTES times the least power of two that holds the usable bytes. Growth keeps
 * the usable part past half the mapping (past the first mapping, when any), so the length follows from it. */
static size_t mapping_bytes(size_t usable)
{
    size_t n = FIRST_BYTES;
    while (n < usable)
        n *= 2;
    return n;
}

int map_array_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    const size_t page = page_bytes();
    if (elem == 0 || elem > page || need > ((size_t)-1 / 4 - page - STEP_BYTES) / elem)
        return -1;
    const size_t usable = *p ? usable_bytes(*cap, elem, page) : 0;
    const size_t old_map = *p ? mapping_bytes(usable) : 0;
    const size_t want = usable_bytes(need, elem, page);
    size_t map = old_map;
    if (want > map)
        map = mapping_bytes(want > 2 * old_map ? want : 2 * old_map);
    void *np = *p;
    if (map != old_map) {
        np = old_map ? mremap(*p, old_map, map, MREMAP_MAYMOVE)
                     : mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (np == MAP_FAILED)
            return -1;
    }
    size_t end = (want + STEP_BYTES - 1) / STEP_BYTES * STEP_BYTES;
    if (end < FIRST_BYTES)
        end = FIRST_BYTES;
    if (end > map)
        end = map;
    /* A page populated in bulk costs about half a page first touched (on the flux.1-dev one-step run, the
     * tensor slab and the tape fill some 200 pages past their first mappings). The first mapping is left to
     * fault page by page: most runs use a few of its pages. A kernel without MADV_POPULATE_WRITE (before
     * Linux 5.14) refuses it, and the pages fault in on first use as they would have. */
    const size_t from = usable > FIRST_BYTES ? usable : FIRST_BYTES;
    if (end > from)
        (void)madvise((char *)np + from, end - from, MADV_POPULATE_WRITE);
    *p = np;
    *cap = end / elem;
    return 0;
}

void map_array_free(void *p, size_t cap, size_t elem)
{
    if (p)
        munmap(p, mapping_bytes(usable_bytes(cap, elem, page_bytes())));
}
