/* prefault.c: populating pages about to be written whole (see prefault.h). */
#define _GNU_SOURCE
#include "util/prefault.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Below this many bytes a table spans at most a couple of whole pages: the call would cost more than it
 * saves. */
#define PREFAULT_MIN_BYTES (16 * 1024)

size_t host_page_bytes(void)
{
    static size_t page;
    if (!page) {
        long n = sysconf(_SC_PAGESIZE);
        page = n > 0 ? (size_t)n : 4096;
    }
    return page;
}

void prefault(void *p, size_t n)
{
    const size_t page = host_page_bytes();
    uintptr_t from = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t to = ((uintptr_t)p + n) & ~(uintptr_t)(page - 1);
    if (to > from)
        (void)madvise((void *)from, to - from, MADV_POPULATE_WRITE);
}

bool prefault_fresh(void *p, size_t n)
{
    const size_t page = host_page_bytes();
    uintptr_t last = (((uintptr_t)p + n) & ~(uintptr_t)(page - 1)) - page;
    unsigned char v;
    if (last < (uintptr_t)p || mincore((void *)last, page, &v) != 0)
        return true;
    return !(v & 1);
}

void prefault_if_fresh(void *p, size_t n)
{
    if (prefault_fresh(p, n))
        prefault(p, n);
}

void *prefault_calloc(size_t n)
{
    if (n < PREFAULT_MIN_BYTES)
        return calloc(1, n);
    void *p = malloc(n);
    if (!p)
        return NULL;
    prefault_if_fresh(p, n);
    return memset(p, 0, n);
}
