/* map_array.c: arrays in anonymous mappings, grown by mremap, their pages prefaulted a stretch at a time
 * (see map_array.h). */
#define _GNU_SOURCE
#include "util/map_array.h"
#include "util/prefault.h"

#include <sys/mman.h>

#define FIRST_BYTES (64 * 1024)
/* The usable part grows a stretch of this many bytes at a time (or to what is needed), prefaulted at once
 * but for the first: at most 3 pages prefaulted and never touched per array, and a run that uses a few
 * pages of an array faults just those. Populating 4 pages in one call costs about half of faulting them
 * in (measured: 1.8 us against 3.2 us), the call itself some 0.1 us. */
#define STEP_BYTES (16 * 1024)

/* The whole pages holding n elements: the usable bytes give cap = bytes / elem back, rounded down, so
 * rounding cap * elem up to the page gives the bytes back when elem is at most a page. */
static size_t usable_bytes(size_t n, size_t elem, size_t page)
{
    return (n * elem + page - 1) / page * page;
}

/* The mapping's length: FIRST_BYTES times the least power of two that holds the usable bytes. The mapping
 * grows only when the usable part outgrows it, and then to hold more than half of it anew, so the length
 * follows from the usable bytes (the caller keeps only the capacity). */
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
    const size_t page = host_page_bytes();
    if (elem == 0 || elem > page || need > ((size_t)-1 / 4 - page - STEP_BYTES) / elem)
        return -1;
    const size_t usable = *p ? usable_bytes(*cap, elem, page) : 0;
    const size_t old_map = *p ? mapping_bytes(usable) : 0;
    /* the next stretch boundary holding need (past usable: need is above the capacity) */
    const size_t end = (usable_bytes(need, elem, page) + STEP_BYTES - 1) / STEP_BYTES * STEP_BYTES;
    void *np = *p;
    if (end > old_map) {
        size_t map = mapping_bytes(end > 2 * old_map ? end : 2 * old_map);
        np = old_map ? mremap(*p, old_map, map, MREMAP_MAYMOVE)
                     : mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (np == MAP_FAILED)
            return -1;
    }
    const size_t from = usable > STEP_BYTES ? usable : STEP_BYTES;
    if (end > from)
        prefault((char *)np + from, end - from);
    *p = np;
    *cap = end / elem;
    return 0;
}

void map_array_free(void *p, size_t cap, size_t elem)
{
    if (p)
        munmap(p, mapping_bytes(usable_bytes(cap, elem, host_page_bytes())));
}
