/* prefault.h: memory about to be written whole, its pages made present in one call (MADV_POPULATE_WRITE)
 * rather than faulted in one by one: on this project's VM a page populated so costs about half a page
 * first touched (1000 pages: 0.5 ms against 1.0 ms). Worth it only for memory that is written whole soon
 * after (a table cleared then filled, an array's next stretch), never for memory that may stay unused, and
 * only for fresh memory: the call walks pages already present too (~0.15 us each, measured), and heap
 * memory freed by one run is present when the next run of the same process (a scenarios directory) gets
 * it back. */
#ifndef OOMLAB_UTIL_PREFAULT_H
#define OOMLAB_UTIL_PREFAULT_H

#include <stdbool.h>
#include <stddef.h>

/* Makes the whole pages within [p, p + n) present and writable (pages already present stay as they are;
 * the partial pages at the ends are left alone). Best effort: a kernel without MADV_POPULATE_WRITE (before
 * Linux 5.14) or short of memory leaves the pages to fault in on first use, as they would have. */
void prefault(void *p, size_t n);

/* Whether heap memory [p, p + n) (several pages) looks fresh, never touched: its last whole page is not
 * present (one mincore call). Memory the heap hands out again is present throughout; fresh memory from the
 * heap's top may share only its first page with what lies before it. True when it cannot tell. */
bool prefault_fresh(void *p, size_t n);

/* prefault(p, n) when [p, p + n) looks fresh (prefault_fresh): for heap memory about to be filled front to
 * back (a slab, an arena chunk), which the heap may hand out again already present. */
void prefault_if_fresh(void *p, size_t n);

/* The host's page size in bytes (sysconf, asked once). */
size_t host_page_bytes(void);

/* A zeroed allocation of n bytes, as calloc, its pages prefaulted first when it spans several and looks
 * fresh: for tables cleared whole and then filled (a hash table's slots). NULL without host memory. */
void *prefault_calloc(size_t n);

#endif
