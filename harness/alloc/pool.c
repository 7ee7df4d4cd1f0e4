/* pool.c: a pool's free blocks in PyTorch's order (std::set by (stream, size, address), BlockComparatorSize in
 * c10/cuda/CUDACachingAllocator.cpp), indexed for a fast best fit. Each stream's blocks are split into size
 * classes, 64 per power of two (a two-level bitmap says which are non-empty, as in TLSF), each class a
 * libbsd red-black tree by (size, address), a class of two blocks or more with its first and last block at
 * hand: lower_bound reads at most two bitmap words and one small tree (or only an end of it) instead of
 * descending one tree of every free block; an insertion lands at an end, or next to the class's hint (the
 * place of its last change), or descends. Walking in order (next, prev, first, last) crosses classes and
 * streams, so callers see exactly the std::set's order. */
#include <stdlib.h>
#include <string.h>

#include "alloc/internal.h"

static int cmp_size(const struct alloc_block *x, const struct alloc_block *y)
{
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

RB_GENERATE(size_tree, alloc_block, node, cmp_size)

/* Classes are ordered like sizes: one per size below POOL_COLS (row 0), then the sizes 2^r <= size < 2^(r+1)
 * split by the POOL_COL_BITS bits below the leading one, in row r - POOL_COL_BITS + 1. With sh = r - POOL_COL_BITS,
 * size >> sh is POOL_COLS + those bits, so the class is (size >> sh) + sh * POOL_COLS; sh = 0 below POOL_COLS
 * makes the same sum the size itself, with no branch. Rows reach 63 - POOL_COL_BITS + 1 < POOL_ROWS. */
static inline unsigned size_class(uint64_t size)
{
    unsigned log = 63u - (unsigned)__builtin_clzll(size | 1);
    unsigned sh = log > POOL_COL_BITS ? log - POOL_COL_BITS : 0;
    return (unsigned)(size >> sh) + sh * POOL_COLS;
}

/* The stream's classes, or the first of a later stream (*exact false), or NULL. Streams are few: a scan, after
 * the stream last looked up (most calls are for it). */
static inline struct stream_bins *bins_at_or_after(const struct pool *p, uint64_t stream, bool *exact)
{
    if (p->recent && p->recent->stream == stream) {
        *exact = true;
        return p->recent;
    }
    for (size_t i = 0; i < p->nbins; i++) {
        if (p->bins[i]->stream >= stream) {
            *exact = p->bins[i]->stream == stream;
            return p->bins[i];
        }
    }
    *exact = false;
    return NULL;
}

static struct stream_bins *bins_scan(const struct pool *p, uint64_t stream)
{
    for (size_t i = 0; i < p->nbins; i++)
        if (p->bins[i]->stream == stream)
            return p->bins[i];
    return NULL;
}

static inline struct stream_bins *bins_of(const struct pool *p, uint64_t stream)
{
    return p->recent && p->recent->stream == stream ? p->recent : bins_scan(p, stream);
}

/* bins_of, remembered as the pool's recent stream: for the updates, which may write the pool. */
static inline struct stream_bins *bins_find(struct pool *p, uint64_t stream)
{
    if (p->recent && p->recent->stream == stream)
        return p->recent;
    struct stream_bins *s = bins_scan(p, stream);
    if (s)
        p->recent = s;
    return s;
}

/* A stream's first free block in this pool: a new set of classes, in stream order. Out of line, so the
 * insertions that find their stream's classes (all but a handful) save no registers for it. */
static __attribute__((noinline)) struct stream_bins *bins_add(struct pool *p, uint64_t stream)
{
    size_t i = 0;
    while (i < p->nbins && p->bins[i]->stream < stream)
        i++;
    if (p->nbins == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 4;
        struct stream_bins **grown = realloc(p->bins, cap * sizeof *grown);
        if (!grown)
            abort(); /* out of host memory: as block_new */
        p->bins = grown;
        p->cap = cap;
    }
    struct stream_bins *s = malloc(sizeof *s); /* the classes are read only once their bits are set */
    if (!s)
        abort();
    s->stream = stream;
    p->recent = s;
    s->rows = 0;
    memset(s->cols, 0, sizeof s->cols);
    for (size_t j = p->nbins; j > i; j--)
        p->bins[j] = p->bins[j - 1];
    p->bins[i] = s;
    p->nbins++;
    return s;
}

static inline struct stream_bins *bins_get(struct pool *p, uint64_t stream)
{
    struct stream_bins *s = bins_find(p, stream);
    return s ? s : bins_add(p, stream);
}

void pool_free(struct pool *p)
{
    for (size_t i = 0; i < p->nbins; i++)
        free(p->bins[i]);
    free(p->bins);
    p->bins = NULL;
    p->recent = NULL;
    p->nbins = p->cap = 0;
}

static size_t bins_index(const struct pool *p, const struct stream_bins *s)
{
    size_t i = 0;
    while (p->bins[i] != s)
        i++;
    return i;
}

/* The first non-empty class >= c (c < POOL_CLASSES), or POOL_CLASSES. */
static inline unsigned class_at_or_after(const struct stream_bins *s, unsigned c)
{
    unsigned row = c / POOL_COLS;
    uint64_t cols = s->cols[row] & (UINT64_MAX << (c % POOL_COLS));
    if (cols)
        return row * POOL_COLS + (unsigned)__builtin_ctzll(cols);
    uint64_t rows = row + 1 < POOL_ROWS ? s->rows & (~0ULL << (row + 1)) : 0;
    if (!rows)
        return POOL_CLASSES;
    row = (unsigned)__builtin_ctzll(rows);
    return row * POOL_COLS + (unsigned)__builtin_ctzll(s->cols[row]);
}

/* The last non-empty class <= c, or POOL_CLASSES when there is none. */
static unsigned class_at_or_before(const struct stream_bins *s, unsigned c)
{
    unsigned row = c / POOL_COLS;
    uint64_t cols = s->cols[row] & (UINT64_MAX >> (POOL_COLS - 1 - c % POOL_COLS));
    if (cols)
        return row * POOL_COLS + 63u - (unsigned)__builtin_clzll(cols);
    uint64_t rows = row ? s->rows & (~0ULL >> (64 - row)) : 0;
    if (!rows)
        return POOL_CLASSES;
    row = 63u - (unsigned)__builtin_clzll(rows);
    return row * POOL_COLS + 63u - (unsigned)__builtin_clzll(s->cols[row]);
}

/* A class's only block has no children; a class of two or more has its ends kept. */
static inline bool class_lone(const struct alloc_block *root)
{
    return !RB_LEFT(root, node) && !RB_RIGHT(root, node);
}

/* The first and last block of non-empty class c. */
static inline struct alloc_block *class_min(const struct stream_bins *s, unsigned c)
{
    struct alloc_block *root = RB_ROOT(&s->classes[c]);
    return class_lone(root) ? root : s->ends[c].min;
}

static inline struct alloc_block *class_max(const struct stream_bins *s, unsigned c)
{
    struct alloc_block *root = RB_ROOT(&s->classes[c]);
    return class_lone(root) ? root : s->ends[c].max;
}

/* The smallest block of streams[i..], or NULL. */
static struct alloc_block *first_from(const struct pool *p, size_t i)
{
    for (; i < p->nbins; i++) {
        unsigned c = class_at_or_after(p->bins[i], 0);
        if (c < POOL_CLASSES)
            return class_min(p->bins[i], c);
    }
    return NULL;
}

/* The largest block of streams[..i), or NULL. */
static struct alloc_block *last_before(const struct pool *p, size_t i)
{
    while (i-- > 0) {
        unsigned c = class_at_or_before(p->bins[i], POOL_CLASSES - 1);
        if (c < POOL_CLASSES)
            return class_max(p->bins[i], c);
    }
    return NULL;
}

/* The first block after every block of class c of stream s, or NULL. */
static inline struct alloc_block *first_after_class(const struct pool *p, struct stream_bins *s, unsigned c)
{
    unsigned next = c + 1 < POOL_CLASSES ? class_at_or_after(s, c + 1) : POOL_CLASSES;
    if (next < POOL_CLASSES)
        return class_min(s, next);
    return first_from(p, bins_index(p, s) + 1);
}

/* The last block before every block of class c of stream s, or NULL. */
static struct alloc_block *last_before_class(const struct pool *p, struct stream_bins *s, unsigned c)
{
    unsigned prev = c ? class_at_or_before(s, c - 1) : POOL_CLASSES;
    if (prev < POOL_CLASSES)
        return class_max(s, prev);
    return last_before(p, bins_index(p, s));
}

struct alloc_block *pool_first(const struct pool *p)
{
    return first_from(p, 0);
}

struct alloc_block *pool_last(const struct pool *p)
{
    return last_before(p, p->nbins);
}

/* x sorts before (size, addr) in its class, computed without branches: the way down a tree is unpredictable,
 * so the searches below pick each child with a mask. */
static inline bool block_before(const struct alloc_block *x, uint64_t size, uint64_t addr)
{
    unsigned __int128 xk = (unsigned __int128)x->size << 64 | x->addr;
    unsigned __int128 k = (unsigned __int128)size << 64 | addr;
    return xk < k;
}

static inline struct alloc_block *pick(bool c, struct alloc_block *x, struct alloc_block *y)
{
    return pick_addr(c, x, y);
}

/* n's left child's link, or its right child's when right: the two are neighbours, so the side is an index, not
 * a select. Not in the descents: they load both children with the key, so that the next node's address does
 * not wait for the comparison (indexing there took fewer instructions, the mix no less time). Packed links:
 * computed from the block's address, not taken from a member. */
static inline struct alloc_block **child_link(struct alloc_block *n, bool right)
{
    _Static_assert(offsetof(struct block_links, rbe_right) == offsetof(struct block_links, rbe_left) + sizeof(void *),
                   "right link right after the left one");
    return (struct alloc_block **)((char *)n + offsetof(struct alloc_block, node) +
                                   offsetof(struct block_links, rbe_left) + right * sizeof(void *));
}

struct alloc_block *pool_lower_bound(const struct pool *p, uint64_t stream, uint64_t size, uint64_t addr)
{
    bool exact;
    struct stream_bins *s = bins_at_or_after(p, stream, &exact);
    if (!s)
        return NULL;
    if (!exact)
        return first_from(p, bins_index(p, s));
    unsigned c = size_class(size);
    /* the bitmap first: an empty class's head is not worth a cache miss */
    if (!(s->cols[c / POOL_COLS] >> (c % POOL_COLS) & 1))
        return first_after_class(p, s, c);
    struct alloc_block *n = RB_ROOT(&s->classes[c]), *res = NULL;
    struct alloc_block *min = n, *max = n;
    if (!class_lone(n)) {
        min = s->ends[c].min;
        max = s->ends[c].max;
    }
    if (!block_before(min, size, addr))
        return min;
    if (block_before(max, size, addr))
        return first_after_class(p, s, c);
    /* min < key <= max: found in the class */
    while (n) {
        bool before = block_before(n, size, addr);
        struct alloc_block *l = RB_LEFT(n, node), *r = RB_RIGHT(n, node);
        res = pick(before, res, n);
        n = pick(before, r, l);
    }
    return res;
}

struct alloc_block *pool_next(const struct pool *p, struct alloc_block *b)
{
    struct alloc_block *n = RB_NEXT(size_tree, NULL, b);
    return n ? n : first_after_class(p, bins_of(p, b->stream), b->size_class);
}

struct alloc_block *pool_prev(const struct pool *p, struct alloc_block *b)
{
    struct alloc_block *n = RB_PREV(size_tree, NULL, b);
    return n ? n : last_before_class(p, bins_of(p, b->stream), b->size_class);
}

/* Where b hangs if it is an in-order neighbour of h (both in one class): off h's free link on b's side, or
 * off the nearest block on that side, whose link towards h is free. false when another block sorts between
 * them. The walk from h is as long as the descent only when h is far from its neighbour in the tree. */
static inline bool place_by_hint(struct alloc_block *h, const struct alloc_block *b, struct alloc_block **parent,
                                 bool *right)
{
    bool after = block_before(h, b->size, b->addr);
    struct alloc_block *n = *child_link(h, after);
    if (n) { /* the neighbour is the nearest block of that subtree */
        while (*child_link(n, !after))
            n = *child_link(n, !after);
        if (block_before(n, b->size, b->addr) == after)
            return false;
        *parent = n;
        *right = !after;
        return true;
    }
    /* the neighbour is the first ancestor reached from the other side (none: h is an end) */
    struct alloc_block *x = h, *up = RB_PARENT(h, node);
    while (up && *child_link(up, after) == x) {
        x = up;
        up = RB_PARENT(up, node);
    }
    if (up && block_before(up, b->size, b->addr) == after)
        return false;
    *parent = h;
    *right = after;
    return true;
}

/* The parent b hangs from (on its right when *right) between the class's ends: next to the hint, or found by
 * RB_INSERT's descent (keys are unique: no two free blocks share an address). */
static inline struct alloc_block *inner_parent(struct alloc_block *root, struct alloc_block *hint,
                                               const struct alloc_block *b, bool *right)
{
    struct alloc_block *parent;
    if (place_by_hint(hint, b, &parent, right))
        return parent;
    struct alloc_block *n = root;
    do {
        parent = n;
        *right = block_before(n, b->size, b->addr);
        struct alloc_block *l = RB_LEFT(n, node), *r = RB_RIGHT(n, node);
        n = pick(*right, r, l);
    } while (n);
    return parent;
}

/* A block before the class's first or after its last hangs off that end, others next to the hint or where the
 * descent ends; then libbsd's rebalancing. Out of line: the common insertion is into an empty class
 * (class_insert). */
static __attribute__((noinline)) void tree_insert(struct size_tree *t, struct class_ends *k, struct alloc_block *b)
{
    struct alloc_block *parent, *root = RB_ROOT(t);
    bool right;
    if (class_lone(root))
        k->min = k->max = k->hint = root; /* its second block: the ends start being kept */
    if (block_before(b, k->min->size, k->min->addr)) {
        parent = k->min;
        right = false;
        k->min = b;
    } else if (block_before(k->max, b->size, b->addr)) {
        parent = k->max;
        right = true;
        k->max = b;
    } else {
        parent = inner_parent(root, k->hint, b, &right);
    }
    RB_SET(b, parent, node);
    *child_link(parent, right) = b;
    k->hint = b;
    size_tree_RB_INSERT_COLOR(t, b);
}

/* Most classes hold at most one block: inserting into an empty class is making b a black root (what RB_INSERT
 * ends with), and removing a childless root empties the class (what RB_REMOVE does for it). */
static inline void class_insert(struct stream_bins *s, unsigned c, struct alloc_block *b)
{
    b->size_class = (uint16_t)c;
    struct size_tree *t = &s->classes[c];
    if (s->cols[c / POOL_COLS] >> (c % POOL_COLS) & 1) { /* the bitmap is at hand; the class head may not be */
        tree_insert(t, &s->ends[c], b);
        return;
    }
    RB_LEFT(b, node) = RB_RIGHT(b, node) = RB_PARENT(b, node) = NULL;
    RB_COLOR(b, node) = RB_BLACK;
    RB_ROOT(t) = b;
    s->cols[c / POOL_COLS] |= 1ULL << (c % POOL_COLS);
    s->rows |= 1ULL << (c / POOL_COLS);
}

static inline void class_remove(struct stream_bins *s, struct alloc_block *b)
{
    unsigned c = b->size_class;
    struct size_tree *t = &s->classes[c];
    if (RB_PARENT(b, node) || RB_LEFT(b, node) || RB_RIGHT(b, node)) {
        struct class_ends *k = &s->ends[c];
        /* an end's neighbour is a step away: the first block has no left child, the last no right one (kept
         * alike when one block remains: the ends are then not read) */
        if (b == k->min)
            k->min = RB_NEXT(size_tree, NULL, b);
        else if (b == k->max)
            k->max = RB_PREV(size_tree, NULL, b);
        k->hint = RB_PARENT(b, node) ? RB_PARENT(b, node) : k->min; /* either stays in the class (min: updated) */
        RB_REMOVE(size_tree, t, b);
        return; /* the class still holds the others */
    }
    RB_ROOT(t) = NULL;
    unsigned row = c / POOL_COLS;
    s->cols[row] &= ~(1ULL << (c % POOL_COLS));
    if (!s->cols[row])
        s->rows &= ~(1ULL << row);
}

void pool_insert(struct pool *p, struct alloc_block *b)
{
    b->gc_count_base = (uint32_t)p->get_free_blocks_call_count;
    class_insert(bins_get(p, b->stream), size_class(b->size), b);
}

void pool_remove(struct pool *p, struct alloc_block *b)
{
    class_remove(bins_find(p, b->stream), b);
}

/* A smaller key still sorts before b's successor: b keeps its place when it stays in its class and sorts
 * after its predecessor there. Classes are narrow, so most splits move b to a lower class, within the
 * stream's classes found once. */
void pool_shrink_front(struct pool *p, struct alloc_block *b, uint64_t addr)
{
    uint64_t size = b->size - (addr - b->addr);
    unsigned c = size_class(size);
    b->gc_count_base = (uint32_t)p->get_free_blocks_call_count;
    if (c == b->size_class) {
        struct alloc_block *prev = RB_PREV(size_tree, NULL, b);
        if (!prev || block_before(prev, size, addr)) {
            b->addr = addr;
            b->size = size;
            return;
        }
    }
    struct stream_bins *s = bins_find(p, b->stream);
    class_remove(s, b);
    b->addr = addr;
    b->size = size;
    class_insert(s, c, b);
}
