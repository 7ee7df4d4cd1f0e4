/* id_map.c: the live-ID table of a text trace (see id_map.h). Records of IDs up to ID_SHORT bytes
 * are recycled through a free list; longer ones are allocated to size. */
#include "replay/id_map.h"

#include <stdlib.h>
#include <string.h>

#define ID_SHORT 31

struct id_record {
    uint64_t key;
    size_t len;
    struct id_record *next_spare;
    char word[]; /* ID_SHORT + 1 bytes, or len + 1 for a longer ID */
};

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

/* Eight bytes at a time, each word of them folded in by a multiply, then the tail as one word (the
 * length is mixed in first, so tails that read alike at different lengths differ). */
uint64_t id_map_hash(const char *word, size_t len)
{
    const uint64_t k = UINT64_C(0x9E3779B97F4A7C15);
    uint64_t h = len * k, x;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&x, word + i, 8);
        h = (h ^ x) * k;
        h ^= h >> 29;
    }
    const unsigned char *t = (const unsigned char *)word + i;
    size_t n = len - i; /* 0..7 tail bytes, read as two overlapping halves (as wyhash does) */
    uint32_t lo = 0, hi = 0;
    if (n >= 4) {
        memcpy(&lo, t, 4);
        memcpy(&hi, t + n - 4, 4);
    } else if (n) {
        lo = (uint32_t)t[0] << 16 | (uint32_t)t[n / 2] << 8 | t[n - 1];
    }
    x = (uint64_t)hi << 32 | lo;
    h = (h ^ x) * k;
    h ^= h >> 32;
    h *= k;
    h ^= h >> 29;
    return h;
}

ptrdiff_t id_map_find(const struct id_map *m, const char *word, size_t len, uint64_t hash)
{
    const struct open_index *x = &m->index;
    for (ptrdiff_t i = open_index_first(x, hash); i >= 0; i = open_index_next(x, hash, ((size_t)i + 1) & x->mask)) {
        const struct id_record *r = x->slots[i].item;
        if (r->len == len && memcmp(r->word, word, len) == 0)
            return i;
    }
    return -1;
}

uint64_t id_map_key(const struct id_map *m, ptrdiff_t i)
{
    return ((const struct id_record *)m->index.slots[i].item)->key;
}

int id_map_insert(struct id_map *m, const char *word, size_t len, uint64_t hash, uint64_t key)
{
    struct id_record *r = len <= ID_SHORT && m->spare ? m->spare : malloc(sizeof *r + (len > ID_SHORT ? len : ID_SHORT) + 1);
    if (!r)
        return -1;
    if (r == m->spare)
        m->spare = r->next_spare;
    r->key = key;
    r->len = len;
    memcpy(r->word, word, len);
    r->word[len] = '\0';
    if (open_index_insert(&m->index, hash, r) == 0)
        return 0;
    recycle(m, r);
    return -1;
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
