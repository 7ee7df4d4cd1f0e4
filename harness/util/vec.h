/* vec.h: growing a heap array geometrically (the one helper every dynamic array in oomlab uses). */
#ifndef OOMLAB_VEC_H
#define OOMLAB_VEC_H

#include <stddef.h>

/* Makes *p hold at least `need` elements of `elem` bytes (capacity in *cap); 0, or -1 if out of memory
 * (then *p and *cap are unchanged). */
int vec_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
