/* id_map.h: a text trace's live IDs (words as written) to the number each alloc gave them, in an
 * open-addressing index (util/open_index.h: deletion by backward shift, so a trace that allocates and
 * frees millions of IDs leaves no tombstones behind). Memory follows the IDs live at once, never
 * the length of the trace. */
#ifndef OOMLAB_ID_MAP_H
#define OOMLAB_ID_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/open_index.h"

#define ID_SHORT 31 /* IDs up to this long have their records recycled; longer ones are allocated to size */

struct id_record {
    uint64_t key;
    size_t len;
    struct id_record *next_spare;
    char word[]; /* ID_SHORT + 1 bytes, or len + 1 for a longer ID */
};

struct id_map {
    struct open_index index; /* of id_records by their words' hashes; index.count: the live IDs */
    struct id_record *spare; /* short records freed, for the next IDs */
};

/* A word's hash, computed once per line and handed to find and add: eight bytes at a time, each word of
 * them folded in by a multiply, then the tail as one word (the length is mixed in first, so tails that
 * read alike at different lengths differ). Inline, as find is: they run for every line of a trace. */
static inline uint64_t id_map_hash(const char *word, size_t len)
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

/* Whether a and b, len bytes each, are the same: up to eight bytes as two overlapping halves (as
 * id_map_hash reads them), without a call to memcmp. */
static inline bool id_map_same(const char *a, const char *b, size_t len)
{
    if (len > 8)
        return memcmp(a, b, len) == 0;
    if (len >= 4) {
        uint32_t a0, a1, b0, b1;
        memcpy(&a0, a, 4);
        memcpy(&b0, b, 4);
        memcpy(&a1, a + len - 4, 4);
        memcpy(&b1, b + len - 4, 4);
        return a0 == b0 && a1 == b1;
    }
    return !len || (a[0] == b[0] && a[len / 2] == b[len / 2] && a[len - 1] == b[len - 1]);
}

/* The slot of word, probing from slot i (hash's home to start); when word is not live, ~ the empty slot
 * that ends the probe run (a negative number), where it would be added. */
static inline ptrdiff_t id_map_seek(const struct id_map *m, const char *word, size_t len, uint64_t hash, size_t i)
{
    const struct open_index *x = &m->index;
    for (;; i = (i + 1) & x->mask) {
        i = open_index_seek(x, hash, i);
        const struct id_record *r = x->slots[i].item;
        if (!r)
            return ~(ptrdiff_t)i;
        if (r->len == len && id_map_same(r->word, word, len))
            return (ptrdiff_t)i;
    }
}

/* The slot of word, or -1 when it is not live. */
static inline ptrdiff_t id_map_find(const struct id_map *m, const char *word, size_t len, uint64_t hash)
{
    if (!m->index.slots)
        return -1;
    ptrdiff_t at = id_map_seek(m, word, len, hash, open_index_home(&m->index, hash));
    return at < 0 ? -1 : at;
}

/* The key of the live ID in slot i (from id_map_find). */
static inline uint64_t id_map_key(const struct id_map *m, ptrdiff_t i)
{
    return ((const struct id_record *)m->index.slots[i].item)->key;
}

/* Adds word with key unless it is live: 0 added, 1 live already (nothing added), -1 out of memory. One
 * probe does both, for an alloc line. */
int id_map_add(struct id_map *m, const char *word, size_t len, uint64_t hash, uint64_t key);
/* Removes the ID in slot i (from id_map_find, with no add or remove since). */
void id_map_remove(struct id_map *m, ptrdiff_t i);
void id_map_free(struct id_map *m);

#endif
