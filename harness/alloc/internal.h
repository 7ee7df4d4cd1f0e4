/* internal.h: the allocator model's data structures, shared by its source files only.
 * Free blocks are ordered like PyTorch's std::sets: a pool's free blocks by (stream, size, address) (pool.c:
 * size classes of libbsd red-black trees), its unmapped ranges by (stream, address) (one libbsd tree). */
#ifndef OOMLAB_ALLOC_INTERNAL_H
#define OOMLAB_ALLOC_INTERNAL_H

#include <bsd/sys/tree.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/allocator.h"

struct segment;

/* A block's red-black links as libbsd's RB_ENTRY, packed: the colour's padding holds gc_count_base. */
struct block_links {
    struct alloc_block *rbe_left, *rbe_right, *rbe_parent;
    int rbe_color;
} __attribute__((packed, aligned(4)));

/* What only a block outside the trees (allocated, or freed and waiting for stream events) needs. */
struct block_uses {
    uint64_t *stream_uses; /* streams recorded by record_stream (not its own), malloc'd; NULL when none */
    uint32_t nstream_uses;
    uint32_t event_count; /* outstanding stream events: freed but not yet back in the pool */
} __attribute__((packed, aligned(4)));

/* 96 bytes, 32-byte aligned: a flux.1-dev step keeps ~7,000 blocks, 216 pages at 128 bytes. A search reads the
 * key and the child links, bytes 0-31: one cache line. Only the free blocks are in trees and only the others
 * have stream uses, so the two share their bytes. */
struct alloc_block {
    uint64_t size;
    uint64_t addr;
    union {
        struct block_links node; /* in a size class of its pool (free, mapped) or pool.unmapped (never both) */
        struct block_uses uses;  /* allocated or pending: zeroed when it leaves a tree (block_clear_uses) */
    };
    uint32_t gc_count_base; /* the low 32 bits: release.c reads the difference as an int, as PyTorch does */
    uint16_t size_class;    /* its size class while in its pool's free blocks (pool.c) */
    bool allocated;
    bool mapped;     /* false only for unmapped ranges of expandable segments */
    bool expandable; /* belongs to an expandable segment */
    bool small;      /* in the small pool (else the large) */
    bool pending;    /* freed, waiting for stream events (uses.event_count > 0) */
    uint64_t stream;
    uint64_t requested_size;
    struct alloc_block *prev, *next; /* neighbours inside the segment */
    struct segment *seg;
} __attribute__((aligned(32)));
_Static_assert(sizeof(struct alloc_block) == 96, "the block layout above adds up to 96 bytes");

RB_HEAD(size_tree, alloc_block);
RB_HEAD(addr_tree, alloc_block);
RB_PROTOTYPE(size_tree, alloc_block, node, cmp_size)
RB_PROTOTYPE(addr_tree, alloc_block, node, cmp_addr)

/* A size class's first and last block, kept while it holds two blocks or more (a lone block is its root).
 * Many free blocks often share one size (a model's repeated layers: flux.1-dev leaves thousands of 14 MiB
 * segments), and best fit takes the first of them: the ends answer most searches, and most insertions land
 * at one of them. Apart from the roots, so the classes of one block (most) cost no more cache than before.
 * hint: a block of the class near the last change (the last inserted, or the parent of the last removed):
 * a block freed back often hangs next to it (flux.1-dev: 2,906 of the 4,851 insertions between the ends). */
struct class_ends {
    struct alloc_block *min, *max, *hint;
};

/* One stream's free blocks in a pool: size classes (pool.c), each a tree by (size, address). A class is set
 * only while its bit is: the classes are left uninitialised until used. */
#define POOL_COL_BITS 6 /* 64 classes per power of two: most hold one block, so most searches read one */
#define POOL_COLS (1u << POOL_COL_BITS)
#define POOL_ROWS 64
#define POOL_CLASSES (POOL_ROWS * POOL_COLS)
struct stream_bins {
    uint64_t stream;
    uint64_t rows;            /* bit r: some class of row r is non-empty */
    uint64_t cols[POOL_ROWS]; /* bit c of cols[r]: class r * POOL_COLS + c is non-empty */
    struct size_tree classes[POOL_CLASSES];
    struct class_ends ends[POOL_CLASSES];
};

struct pool {
    struct stream_bins **bins; /* free mapped blocks, by stream (ascending) */
    size_t nbins, cap;
    struct stream_bins *recent; /* one of bins, the stream last looked up (pool.c), or NULL */
    struct addr_tree unmapped; /* unmapped expandable ranges */
    bool small;
    int64_t get_free_blocks_call_count;
};

/* A cudaMalloc'd segment, or an expandable segment's VA reservation. */
struct segment {
    struct segment *prev_seg, *next_seg;
    uint64_t addr, size; /* for expandable: the whole reservation */
    uint64_t stream;
    uint64_t page;       /* expandable page size (2 MiB small, 20 MiB large) */
    bool small;
    bool expandable;
    struct alloc_block *head; /* the block at addr */
};

struct allocator {
    struct device *dev;
    struct alloc_config cfg;
    bool divisions; /* alloc_config_has_divisions(&cfg): only then does a malloc look its divisions up */
    struct alloc_stats stats;
    struct pool large, small;
    struct segment *segments; /* list of live segments */
    uint64_t total_allocated_memory; /* every reserved byte (segments + mapped pages) */
    bool has_allowed;
    uint64_t allowed_memory_maximum;
    alloc_trace_fn trace;
    void *trace_ctx;
    struct alloc_block *free_structs; /* recycled block structs */
    struct segment *free_segments;    /* recycled segment structs */
    struct block_slab *slabs;         /* where both come from, freed with the allocator (blocks.c) */
    struct slab_room { char *next, *end; } block_room, segment_room; /* each kind's newest slab's unused rest */
    size_t blocks_with_uses;          /* blocks holding a stream_uses array (allocator_destroy frees them) */
    struct stream_event *events;       /* outstanding events of freed blocks, in the order recorded */
    size_t nevents, events_cap;
    struct err *err;                   /* where device errors go during one call */
};

/* A block leaving a tree to be handed out: its tree links become empty stream uses. */
static inline void block_clear_uses(struct alloc_block *b)
{
    b->uses = (struct block_uses){0};
}

/* blocks.c */
struct alloc_block *block_take_slab(struct allocator *a); /* a new struct, when none is recycled */
/* Inline: a split sets some fields again, and its caller's stores then replace these. */
static inline struct alloc_block *block_new(struct allocator *a, uint64_t stream, uint64_t size,
                                            const struct pool *pool, uint64_t addr)
{
    struct alloc_block *b = a->free_structs;
    if (b)
        a->free_structs = b->next;
    else
        b = block_take_slab(a);
    /* field by field: a compound literal clears the whole struct with rep stos first */
    b->size = size;
    b->addr = addr;
    b->uses = (struct block_uses){0};
    b->gc_count_base = 0;
    b->size_class = 0;
    b->allocated = false;
    b->mapped = true;
    b->expandable = false;
    b->small = pool->small;
    b->pending = false;
    b->stream = stream;
    b->requested_size = 0;
    b->prev = b->next = NULL;
    b->seg = NULL;
    return b;
}
/* block_new, linked into seg after prev (at its head when prev is NULL) (restore.c). */
struct alloc_block *block_append(struct allocator *a, struct segment *seg, struct pool *p, struct alloc_block *prev,
                                 uint64_t addr, uint64_t size);
void block_delete(struct allocator *a, struct alloc_block *b);
void block_slabs_free(struct allocator *a);

/* pool.c: the free blocks of a pool as one set ordered by (stream, size, addr). */
void pool_insert(struct pool *p, struct alloc_block *b); /* stamping gc_count_base */
void pool_remove(struct pool *p, struct alloc_block *b);
/* The first free block at or after (stream, size, addr), or NULL: std::set::lower_bound. */
struct alloc_block *pool_lower_bound(const struct pool *p, uint64_t stream, uint64_t size, uint64_t addr);
struct alloc_block *pool_first(const struct pool *p);
struct alloc_block *pool_last(const struct pool *p);
struct alloc_block *pool_next(const struct pool *p, struct alloc_block *b);
struct alloc_block *pool_prev(const struct pool *p, struct alloc_block *b);
/* b, which is in p, now ends at the same address but starts at addr (its low part was handed out): moved to
 * where its new key belongs, and stamped like pool_insert. */
void pool_shrink_front(struct pool *p, struct alloc_block *b, uint64_t addr);
void pool_free(struct pool *p);
/* c ? x : y as a mask, for choices as random as the workload: GCC turns the ternary back into a branch. */
static inline void *pick_addr(bool c, const void *x, const void *y)
{
    uintptr_t mask = -(uintptr_t)c;
    return (void *)(((uintptr_t)x & mask) | ((uintptr_t)y & ~mask));
}

/* The pools are neighbours (struct allocator): a block's is one index, no select. */
_Static_assert(offsetof(struct allocator, small) == offsetof(struct allocator, large) + sizeof(struct pool),
               "small pool right after the large one");
static inline struct pool *block_pool(struct allocator *a, const struct alloc_block *b)
{
    return (struct pool *)((char *)a + offsetof(struct allocator, large) + b->small * sizeof(struct pool));
}

static inline bool block_is_split(const struct alloc_block *b)
{
    return (b->prev != NULL) | (b->next != NULL);
}
/* b->prev now links to b (or, first in its segment, the segment's head does); b->next links back to b if b
 * has one. The link to write is picked with a mask on integers, not a branch: whether a neighbour exists is
 * as random as the workload, and no member is reached through a null pointer. */
static inline void block_link_prev(struct alloc_block *b)
{
    uintptr_t via_prev = (uintptr_t)b->prev + offsetof(struct alloc_block, next);
    *(struct alloc_block **)pick_addr(b->prev != NULL, (const void *)via_prev, &b->seg->head) = b;
}

static inline void block_link_next(struct alloc_block *b)
{
    struct alloc_block *unused;
    uintptr_t via_next = (uintptr_t)b->next + offsetof(struct alloc_block, prev);
    *(struct alloc_block **)pick_addr(b->next != NULL, (const void *)via_next, &unused) = b;
}
uint64_t try_merge_blocks(struct allocator *a, struct alloc_block *dst, struct alloc_block *src, struct pool *p);
void free_block(struct allocator *a, struct alloc_block *b);
static inline void record_trace(struct allocator *a, enum alloc_action act, uint64_t addr, uint64_t size,
                                uint64_t stream)
{
    if (a->trace) {
        struct alloc_trace_event ev = {act, addr, size, stream};
        a->trace(a->trace_ctx, &ev);
    }
}
struct segment *segment_new(struct allocator *a, uint64_t addr, uint64_t size, uint64_t stream, bool small);
void segment_delete(struct allocator *a, struct segment *s);

/* An event recorded on a stream when a block used there was freed (insert_events); done once the stream
 * synchronised after it (allocator_stream_sync). */
struct stream_event {
    struct alloc_block *block;
    uint64_t stream;
    bool done;
};

/* A freed block still in use on other streams: not allocated, not yet in its pool. */
static inline bool block_pending_free(const struct alloc_block *b)
{
    return b->pending;
}

/* Neither allocated nor waiting for stream events: its pool's to use or release. */
static inline bool block_is_free(const struct alloc_block *b)
{
    return !b->allocated & !b->pending;
}

/* stream_events.c */
void insert_events(struct allocator *a, struct alloc_block *b);
void process_events(struct allocator *a);
void synchronize_and_free_events(struct allocator *a);

/* expandable.c */
struct alloc_block *try_allocate_expandable_block(struct allocator *a, uint64_t stream, struct pool *p,
                                                  uint64_t size, int *device_error);
void unmap_block(struct allocator *a, struct alloc_block *b);
void release_expandable_segment(struct allocator *a, struct alloc_block *b);

/* release.c */
void release_block(struct allocator *a, struct alloc_block *b);
bool release_available_cached_blocks(struct allocator *a, uint64_t size, uint64_t stream, struct pool *p);
void release_cached_blocks(struct allocator *a);
void garbage_collect_cached_blocks(struct allocator *a);

#endif
