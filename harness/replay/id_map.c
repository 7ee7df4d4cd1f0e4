/* id_map.c: the live-ID table of a text trace (see id_map.h). Records of IDs up to ID_SHORT bytes
 * are recycled through a free list; longer ones are allocated to size. The table holds at most half
 * its slots, so a probe ends within a few slots. */
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
    return h ? h : 1;
}

ptrdiff_t id_map_find(const struct id_map *m, const char *word, size_t len, uint64_t hash)
{
    if (!m->mask)
        return -1;
    for (size_t i = hash & m->mask;; i = (i + 1) & m->mask) {
        const struct id_slot *s = &m->slots[i];
        if (!s->hash)
            return -1;
        if (s->hash == hash && s->rec->len == len && memcmp(s->rec->word, word, len) == 0)
            return (ptrdiff_t)i;
    }
}

uint64_t id_map_key(const struct id_map *m, ptrdiff_t i)
{
    return m->slots[i].rec->key;
}

static void place(struct id_slot *slots, size_t mask, struct id_slot s)
{
    size_t i = s.hash & mask;
    while (slots[i].hash)
        i = (i + 1) & mask;
    slots[i] = s;
}

static int grow(struct id_map *m)
{
    size_t n = m->mask ? 2 * (m->mask + 1) : 1024;
    struct id_slot *slots = calloc(n, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; m->mask && i <= m->mask; i++)
        if (m->slots[i].hash)
            place(slots, n - 1, m->slots[i]);
    free(m->slots);
    m->slots = slots;
    m->mask = n - 1;
    return 0;
}

int id_map_insert(struct id_map *m, const char *word, size_t len, uint64_t hash, uint64_t key)
{
    if (2 * (m->count + 1) > m->mask + 1 && grow(m))
        return -1;
    struct id_record *r = len <= ID_SHORT && m->spare ? m->spare : malloc(sizeof *r + (len > ID_SHORT ? len : ID_SHORT) + 1);
    if (!r)
        return -1;
    if (r == m->spare)
        m->spare = r->next_spare;
    r->key = key;
    r->len = len;
    memcpy(r->word, word, len);
    r->word[len] = '\0';
    place(m->slots, m->mask, (struct id_slot){hash, r});
    m->count++;
    return 0;
}

void id_map_remove(struct id_map *m, ptrdiff_t at)
{
    size_t i = (size_t)at;
    struct id_record *r = m->slots[i].rec;
    if (r->len <= ID_SHORT) {
        r->next_spare = m->spare;
        m->spare = r;
    } else {
        free(r);
    }
    /* backward shift: pull later slots of the probe run into the hole unless they already sit at or
     * after their home slot (within the run, cyclically) */
    for (size_t j = (i + 1) & m->mask;; j = (j + 1) & m->mask) {
        if (!m->slots[j].hash)
            break;
        size_t home = m->slots[j].hash & m->mask;
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (struct id_slot){0, NULL};
    m->count--;
}

void id_map_free(struct id_map *m)
{
    for (size_t i = 0; m->mask && i <= m->mask; i++)
        if (m->slots[i].hash)
            free(m->slots[i].rec);
    for (struct id_record *r = m->spare, *next; r; r = next) {
        next = r->next_spare;
        free(r);
    }
    free(m->slots);
    *m = (struct id_map){0};
}
