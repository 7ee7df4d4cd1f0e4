/* bump.c: bump_alloc's slow path (a new chunk) and the release of all chunks (see bump.h). */
#include "util/bump.h"

#include <stdlib.h>

#define BUMP_CHUNK (64 * 1024)

struct bump_chunk {
    struct bump_chunk *next;
    max_align_t data[]; /* aligned for anything */
};

void *bump_alloc_chunk(struct bump *b, size_t n)
{
    size_t size = n > BUMP_CHUNK / 4 ? n : BUMP_CHUNK; /* a large request gets a chunk of its own */
    struct bump_chunk *c = malloc(sizeof *c + size);
    if (!c)
        return NULL;
    char *data = (char *)c->data;
    if (size == n && b->chunks) { /* behind the head, which still has room */
        c->next = b->chunks->next;
        b->chunks->next = c;
        return data;
    }
    c->next = b->chunks;
    b->chunks = c;
    b->at = data + n;
    b->end = data + size;
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
