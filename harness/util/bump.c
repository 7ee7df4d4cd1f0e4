/* bump.c: bump_alloc's slow path (the next stretch of the head chunk, or a new chunk) and the release of
 * all chunks (see bump.h). */
#include "util/bump.h"
#include "util/prefault.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define BUMP_CHUNK (64 * 1024)
/* A chunk is handed out a stretch at a time, each prefaulted (util/prefault.h) as bump_alloc enters it:
 * pieces are taken in order, so a stretch entered is filled. The first chunk's first stretch is left to
 * fault page by page (a small table touches a page or two of it), and so is a chunk the heap handed out
 * again (its pages already present: a later run's, in a process that runs several). */
#define BUMP_STRETCH (16 * 1024)

struct bump_chunk {
    struct bump_chunk *next;
    char *limit; /* the end of its memory (b->end is the end of its stretches so far) */
    bool fresh;  /* its memory was fresh when allocated (prefault_fresh): its stretches are prefaulted */
    max_align_t data[]; /* aligned for anything */
};

/* The end of the stretches holding [.., to): the next BUMP_STRETCH boundary, within the chunk. */
static char *stretch_end(char *to, char *limit)
{
    uintptr_t end = ((uintptr_t)to + BUMP_STRETCH - 1) & ~(uintptr_t)(BUMP_STRETCH - 1);
    return end < (uintptr_t)limit ? (char *)end : limit;
}

void *bump_alloc_chunk(struct bump *b, size_t n)
{
    struct bump_chunk *h = b->chunks;
    if (h && (size_t)(h->limit - b->at) >= n) { /* the head has room past its stretches */
        char *end = stretch_end(b->at + n, h->limit);
        if (h->fresh)
            prefault(b->end, (size_t)(end - b->end));
        b->end = end;
        void *p = b->at;
        b->at += n;
        return p;
    }
    size_t size = n > BUMP_CHUNK / 4 ? n : BUMP_CHUNK; /* a large request gets a chunk of its own */
    struct bump_chunk *c = malloc(sizeof *c + size);
    if (!c)
        return NULL;
    char *data = (char *)c->data;
    c->limit = data + size;
    c->fresh = size == BUMP_CHUNK && prefault_fresh(data, size);
    if (size == n && b->chunks) { /* behind the head, which still has room */
        c->next = b->chunks->next;
        b->chunks->next = c;
        return data;
    }
    c->next = b->chunks;
    b->chunks = c;
    b->at = data + n;
    b->end = stretch_end(b->at, c->limit);
    if (c->next && c->fresh) /* not the first chunk: this one will be filled too */
        prefault(data, (size_t)(b->end - data));
    return data;
}

void bump_free_all(struct bump *b)
{
    while (b->chunks) {
        struct bump_chunk *next = b->chunks->next;
        free(b->chunks);
        b->chunks = next;
    }
    b->at = b->end = NULL;
}
