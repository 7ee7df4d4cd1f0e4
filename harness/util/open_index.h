/* open_index.h: an index of the caller's items by a 64-bit hash, in one open-addressing table: linear
 * probing from the hash's top bits, at most a quarter of the slots full while the table is small (shorter
 * probe runs than at half full: on the text-trace benchmark, fewer instructions and 3-5% less time) and at
 * most half from OPEN_INDEX_DENSE_SLOTS on (half the memory to miss in: on the flux.1-dev one-step run,
 * with 4-8 thousand tensors live, 6-9% less time), or three quarters for hashes that spread evenly
 * (packed), deletion by backward shift (no tombstones, so millions of inserts and removes leave nothing
 * behind: memory follows the items held at once). It is the table behind the lookups made for every op: a
 * text trace's live IDs (replay/id_map.h), the runner's live tensors, the holders' tag pointers. Two items
 * may share a hash; the caller tells them apart (open_index_next walks every slot holding a hash). A 64-bit
 * id hashed by open_index_hash_u64 needs no such check: that hash is a bijection, so equal hashes are equal
 * ids. The index does not iterate (a caller may walk its slots: item NULL is an empty one). */
#ifndef OOMLAB_OPEN_INDEX_H
#define OOMLAB_OPEN_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct open_slot {
    uint64_t hash;
    void *item; /* NULL: an empty slot */
};

struct open_index {        /* all zero: empty, nothing allocated */
    struct open_slot *slots;
    size_t mask;           /* slots - 1 (a power of two) */
    unsigned shift;        /* 64 - log2(slots): a hash's home slot is hash >> shift */
    size_t count;
    size_t limit;          /* the count the table grows at (0: no table yet) */
    /* Set before the first insert, for hashes that spread evenly (open_index_hash_u64 of runs of ids or of
     * aligned addresses: the runner's live tensors): from OPEN_INDEX_DENSE_SLOTS on the table fills to three
     * quarters instead of half (on the flux.1-dev one-step run, ~5800 tensors live at most stay in 8192
     * slots, not 16384: 70 page faults and 0.3 M instructions of growing fewer). */
    bool packed;
};

/* A 64-bit id's hash: Fibonacci hashing's multiply, whose top bits (the home slot) spread runs of ids
 * and aligned addresses alike. Odd multiplier: a bijection. */
static inline uint64_t open_index_hash_u64(uint64_t id)
{
    return id * UINT64_C(0x9E3779B97F4A7C15);
}

/* A hash's home slot, where its probe starts (the table must exist). */
static inline size_t open_index_home(const struct open_index *x, uint64_t hash)
{
    return (size_t)(hash >> x->shift);
}

/* The first slot at or after slot i, in probe order, that holds hash or is empty. */
static inline size_t open_index_seek(const struct open_index *x, uint64_t hash, size_t i)
{
    while (x->slots[i].item && x->slots[i].hash != hash)
        i = (i + 1) & x->mask;
    return i;
}

/* The first slot at or after slot i, in probe order, holding hash; -1 when an empty slot comes first. */
static inline ptrdiff_t open_index_next(const struct open_index *x, uint64_t hash, size_t i)
{
    i = open_index_seek(x, hash, i);
    return x->slots[i].item ? (ptrdiff_t)i : -1;
}

/* The first slot holding hash, or -1. */
static inline ptrdiff_t open_index_first(const struct open_index *x, uint64_t hash)
{
    return x->slots ? open_index_next(x, hash, open_index_home(x, hash)) : -1;
}

/* The item under a hash that only one item may hold (open_index_hash_u64), or NULL. */
static inline void *open_index_get(const struct open_index *x, uint64_t hash)
{
    ptrdiff_t i = open_index_first(x, hash);
    return i < 0 ? NULL : x->slots[i].item;
}

/* Doubles the table (the first: 64 slots); -1 when out of memory (the index is then unchanged). */
int open_index_grow(struct open_index *x);

/* From this many slots (64 KiB) a table fills to half instead of a quarter. */
#define OPEN_INDEX_DENSE_SLOTS 4096

/* Room for one more item (the table grows past a quarter full, or half full from OPEN_INDEX_DENSE_SLOTS on,
 * three quarters if packed); -1 when out of memory. */
static inline int open_index_reserve(struct open_index *x)
{
    return x->count == x->limit ? open_index_grow(x) : 0;
}

/* The slot for hash, with room reserved for one more item: the first slot holding hash, or the empty slot
 * that ends its probe run (for open_index_put; valid until the index changes). -1 when out of memory. One
 * probe serves both the check that hash is not held and the insert. */
static inline ptrdiff_t open_index_slot(struct open_index *x, uint64_t hash)
{
    if (open_index_reserve(x))
        return -1;
    return (ptrdiff_t)open_index_seek(x, hash, open_index_home(x, hash));
}

/* Puts item (not NULL) under hash into slot i: the empty slot that ends hash's probe run (open_index_seek
 * from its home), with room reserved since. */
static inline void open_index_put(struct open_index *x, size_t i, uint64_t hash, void *item)
{
    x->slots[i] = (struct open_slot){hash, item};
    x->count++;
}

/* Adds item (not NULL, not held) under hash; -1 when out of memory (the index is then unchanged). */
static inline int open_index_insert(struct open_index *x, uint64_t hash, void *item)
{
    if (open_index_reserve(x))
        return -1;
    size_t i = open_index_home(x, hash);
    while (x->slots[i].item)
        i = (i + 1) & x->mask;
    open_index_put(x, i, hash, item);
    return 0;
}

/* open_index_remove_at's slow path: slot i is followed by a full slot (whose item may have to move back). */
void open_index_shift_out(struct open_index *x, size_t i);

/* Removes the item in slot i (from open_index_first/next, with no insert or remove since). Mostly the next
 * slot is empty (a quarter or half full at most) and the slot is just emptied. */
static inline void open_index_remove_at(struct open_index *x, size_t i)
{
    if (x->slots[(i + 1) & x->mask].item) {
        open_index_shift_out(x, i);
        return;
    }
    x->slots[i] = (struct open_slot){0, NULL};
    x->count--;
}

/* Removes the item under hash, if any (a hash only one item holds); returns it or NULL. */
static inline void *open_index_remove(struct open_index *x, uint64_t hash)
{
    ptrdiff_t i = open_index_first(x, hash);
    if (i < 0)
        return NULL;
    void *item = x->slots[i].item;
    open_index_remove_at(x, (size_t)i);
    return item;
}
/* Frees the table (not the items) and empties the index (it stays packed if it was). */
void open_index_free(struct open_index *x);

#endif
