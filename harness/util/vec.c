/* vec.c: see vec.h. */
#include "util/vec.h"

#include <stdlib.h>

int vec_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *np = realloc(*p, n * elem);
    if (!np)
        return -1;
    *p = np;
    *cap = n;
    return 0;
}
