/* bump.h: memory handed out by bumping a pointer through chunks, all freed at once (tables whose entries
 * live as long as the table: a malloc and a free per entry cost more than the entry's work). A chunk's
 * memory is handed out 16 KiB at a time, its pages prefaulted then (bump.c): on the flux.1-dev one-step run
 * the runner's ~5,800 live tensors fill some 70 pages. */
#ifndef OOMLAB_UTIL_BUMP_H
#define OOMLAB_UTIL_BUMP_H

#include <stddef.h>

struct bump_chunk;

struct bump {
    struct bump_chunk *chunks; /* the head is the one being filled */
    char *at, *end;            /* free space in the head's stretches so far */
};

/* bump_alloc's slow path: the head's next stretch, or a new chunk. */
void *bump_alloc_chunk(struct bump *b, size_t n);

/* n bytes with no alignment (text), NULL without host memory. Only for a bump whose pieces are all taken
 * so: after one, bump_alloc's pieces would be misaligned. */
static inline void *bump_alloc_unaligned(struct bump *b, size_t n)
{
    if ((size_t)(b->end - b->at) < n)
        return bump_alloc_chunk(b, n);
    void *p = b->at;
    b->at += n;
    return p;
}

/* n bytes aligned for any object (max_align_t), NULL without host memory. */
static inline void *bump_alloc(struct bump *b, size_t n)
{
    return bump_alloc_unaligned(b, (n + _Alignof(max_align_t) - 1) & ~(size_t)(_Alignof(max_align_t) - 1));
}

/* Frees every chunk; the bump is empty again. */
void bump_free_all(struct bump *b);

#endif
