/* map_array.h: arrays grown without copying, in their own mappings (the generator's tensor slab, tape and parameters).
 *
 * realloc copies a grown array into new memory, so growth touches about twice the final size in page
 * faults, and the sizes are not known ahead (a model's tensors, nodes and parameters). These arrays live
 * in their own anonymous mapping, extended by mremap, which moves the pages already touched instead of
 * copying them. The capacity grows 16 KiB at a time, each stretch past the first prefaulted at once
 * (util/prefault.h: half the cost of faulting its pages in one by one), since an array filled that far
 * goes on filling: on the flux.1-dev one-step run some 210 pages of the tensor slab, the tape and the
 * parameters. */
#ifndef OOMLAB_UTIL_MAP_ARRAY_H
#define OOMLAB_UTIL_MAP_ARRAY_H

#include <stddef.h>

/* Makes *p (NULL, or from map_array_grow) hold at least `need` elements of `elem` bytes (elem at most a page);
 * *cap is its capacity in elements (the usable stretches: the mapping's length follows from it). 0, or -1
 * without memory (then *p and *cap are unchanged). New elements read as zero bytes. */
int map_array_grow(void **p, size_t *cap, size_t need, size_t elem);
/* Frees an array from map_array_grow (NULL: nothing) with the capacity and elem it was given. */
void map_array_free(void *p, size_t cap, size_t elem);

#endif
