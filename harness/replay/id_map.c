/* id_map.c: the live-ID table of a text trace (see id_map.h): adding and removing IDs, their records
 * recycled through a free list. */
#include "replay/id_map.h"

#include <stdlib.h>
#include <string.h>

/* A removed record: kept for the next short ID, or freed. */
static void recycle(struct id_map *m, struct id_record *r)
{
    if (r->len <= ID_SHORT) {
        r->next_spare = m->spare;
        m->spare = r;
    } else {
        free(r);
    }
}

int id_map_add(struct id_map *m, const char *word, size_t len, uint64_t hash, uint64_t key)
{
    if (open_index_reserve(&m->index))
        return -1;
    ptrdiff_t at = id_map_seek(m, word, len, hash, open_index_home(&m->index, hash));
    if (at >= 0)
        return 1;
    struct id_record *r = len <= ID_SHORT && m->spare ? m->spare : malloc(sizeof *r + (len > ID_SHORT ? len : ID_SHORT) + 1);
    if (!r)
        return -1;
    if (r == m->spare)
        m->spare = r->next_spare;
    r->key = key;
    r->len = len;
    memcpy(r->word, word, len);
    r->word[len] = '\0';
    open_index_put(&m->index, (size_t)~at, hash, r);
    return 0;
}

void id_map_remove(struct id_map *m, ptrdiff_t at)
{
    recycle(m, m->index.slots[at].item);
    open_index_remove_at(&m->index, (size_t)at);
}

void id_map_free(struct id_map *m)
{
    for (size_t i = 0; m->index.slots && i <= m->index.mask; i++)
        free(m->index.slots[i].item);
    for (struct id_record *r = m->spare, *next; r; r = next) {
        next = r->next_spare;
        free(r);
    }
    open_index_free(&m->index);
    m->spare = NULL;
}
