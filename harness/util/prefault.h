/* prefault.h: memory about to be written whole, its pages made present in one call (MADV_POPULATE_WRITE)
 * rather than faulted in one by one: on this project's VM a page populated so costs about half a page
 * first touched (1000 pages: 0.5 ms against 1.0 ms). Worth it only for memory that is written whole soon
 * after (a table cleared then filled, an array's next stretch), never for memory that may stay unused. */
#ifndef OOMLAB_UTIL_PREFAULT_H
#define OOMLAB_UTIL_PREFAULT_H

#include <stddef.h>

/* Makes the whole pages within [p, p + n) present and writable (pages already present stay as they are;
 * the partial pages at the ends are left alone). Best effort: a kernel without MADV_POPULATE_WRITE (before
 * Linux 5.14) or short of memory leaves the pages to fault in on first use, as they would have. */
void prefault(void *p, size_t n);

/* A zeroed allocation of n bytes, as calloc, its pages prefaulted first when it spans several: for tables
 * cleared whole and then filled (a hash table's slots). NULL without host memory. */
void *prefault_calloc(size_t n);

#endif
