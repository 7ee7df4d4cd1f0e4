/* strpool.c: interning string pool: an open-addressing hash table over strings kept in a bump allocator's
 * chunks (util/bump.h: one after another, their pages prefaulted a stretch at a time). */
#include "workload/strpool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/bump.h"
#include "util/hash.h"
#include "util/prefault.h"

/* A string with its hash: growing does not hash again, and a probe compares hashes before text. */
struct slot {
    uint64_t hash;
    const char *s; /* NULL: empty */
};

struct strpool {
    struct slot *slots;
    size_t nslots, count, bytes;
    struct bump text; /* the strings, each right after the last */
};

struct strpool *strpool_create(void)
{
    struct strpool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->nslots = 1024;
    p->slots = calloc(p->nslots, sizeof *p->slots);
    if (!p->slots) {
        free(p);
        return NULL;
    }
    p->bytes = sizeof *p + p->nslots * sizeof *p->slots;
    return p;
}

void strpool_destroy(struct strpool *p)
{
    if (!p)
        return;
    bump_free_all(&p->text);
    free(p->slots);
    free(p);
}

static int grow(struct strpool *p)
{
    size_t n = p->nslots * 2;
    struct slot *s = n <= SIZE_MAX / sizeof *s ? prefault_calloc(n * sizeof *s) : NULL; /* cleared whole, then filled */
    if (!s)
        return -1;
    for (size_t i = 0; i < p->nslots; i++) {
        if (!p->slots[i].s)
            continue;
        size_t j = p->slots[i].hash & (n - 1);
        while (s[j].s)
            j = (j + 1) & (n - 1);
        s[j] = p->slots[i];
    }
    free(p->slots);
    p->bytes += (n - p->nslots) * sizeof *s;
    p->slots = s;
    p->nslots = n;
    return 0;
}

static char *store(struct strpool *p, const char *s, size_t len)
{
    char *r = bump_alloc_unaligned(&p->text, len + 1);
    if (!r)
        return NULL;
    memcpy(r, s, len + 1);
    p->bytes += len + 1;
    return r;
}

const char *strpool_intern(struct strpool *p, const char *s)
{
    return strpool_intern_len(p, s, strlen(s));
}

/* Linear probing up to 3/4 full: a model's few thousand tags take half the table (and its page faults) that
 * a limit of 1/2 did, for a probe or two more per miss. */
const char *strpool_intern_len(struct strpool *p, const char *s, size_t len)
{
    if (4 * (p->count + 1) > 3 * p->nslots && grow(p) < 0)
        return NULL;
    uint64_t h = hash_bytes(s, len);
    size_t j = h & (p->nslots - 1);
    while (p->slots[j].s) {
        if (p->slots[j].hash == h && strcmp(p->slots[j].s, s) == 0)
            return p->slots[j].s;
        j = (j + 1) & (p->nslots - 1);
    }
    char *r = store(p, s, len);
    if (!r)
        return NULL;
    p->slots[j] = (struct slot){h, r};
    p->count++;
    return r;
}

size_t strpool_bytes(const struct strpool *p)
{
    return p->bytes;
}
