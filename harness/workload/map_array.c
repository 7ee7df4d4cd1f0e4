/* map_array.c: arrays in anonymous mappings, grown by mremap (see map_array.h). */
#define _GNU_SOURCE
#include "workload/map_array.h"

#include <sys/mman.h>
#include <unistd.h>

#define FIRST_BYTES (64 * 1024)

static size_t page_bytes(void)
{
    long n = sysconf(_SC_PAGESIZE);
    return n > 0 ? (size_t)n : 4096;
}

/* The mapping's length for cap elements: cap is the mapping's length / elem, rounded down, so rounding
 * cap * elem up to the page gives the length back when elem is at most a page. */
static size_t mapped_bytes(size_t cap, size_t elem, size_t page)
{
    return (cap * elem + page - 1) / page * page;
}

int map_array_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    const size_t page = page_bytes();
    if (elem == 0 || elem > page || need > ((size_t)-1 / 2 - page) / elem)
        return -1;
    size_t old = *p ? mapped_bytes(*cap, elem, page) : 0;
    size_t bytes = old ? 2 * old : FIRST_BYTES;
    if (bytes < need * elem)
        bytes = mapped_bytes(need, elem, page);
    bytes = (bytes + page - 1) / page * page;
    void *np = old ? mremap(*p, old, bytes, MREMAP_MAYMOVE)
                   : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (np == MAP_FAILED)
        return -1;
    *p = np;
    *cap = bytes / elem;
    return 0;
}

void map_array_free(void *p, size_t cap, size_t elem)
{
    if (p)
        munmap(p, mapped_bytes(cap, elem, page_bytes()));
}
