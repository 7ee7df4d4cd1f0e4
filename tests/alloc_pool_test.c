/* alloc_pool_test.c: the free-block index (harness/alloc/pool.c) keeps std::set's (stream, size, address)
 * order exactly: worked lookups across size classes and streams, and within one class of equal sizes (its
 * first and last block found, removed and moved), then random insertions, removals and front shrinks checked
 * against a brute-force model (lower_bound, walks forwards and backwards), over sizes of every range and over
 * three sizes of one class, there also with removed blocks put back at once (next to the class's hint). */
#include "tap.h"

#include "alloc/internal.h"
#include "util/size.h"

#define NBLOCKS 1500

static struct alloc_block blocks[NBLOCKS];
static bool present[NBLOCKS];

static uint64_t rng_state = 42;

static uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static bool key_less(const struct alloc_block *x, uint64_t stream, uint64_t size, uint64_t addr)
{
    if (x->stream != stream)
        return x->stream < stream;
    if (x->size != size)
        return x->size < size;
    return x->addr < addr;
}

static bool block_less(const struct alloc_block *x, const struct alloc_block *y)
{
    return key_less(x, y->stream, y->size, y->addr);
}

static struct alloc_block *model_lower_bound(uint64_t stream, uint64_t size, uint64_t addr)
{
    struct alloc_block *best = NULL;
    for (int i = 0; i < NBLOCKS; i++)
        if (present[i] && !key_less(&blocks[i], stream, size, addr) && (!best || block_less(&blocks[i], best)))
            best = &blocks[i];
    return best;
}

static int model_count(void)
{
    int n = 0;
    for (int i = 0; i < NBLOCKS; i++)
        n += present[i];
    return n;
}

/* Walks forwards and backwards: every present block once, each after the previous in key order. */
static const char *check_walks(const struct pool *p)
{
    int n = 0;
    for (struct alloc_block *b = pool_first(p), *prev = NULL; b; prev = b, b = pool_next(p, b), n++)
        if (prev && !block_less(prev, b))
            return "forward walk out of order";
    if (n != model_count())
        return "forward walk misses or repeats blocks";
    n = 0;
    for (struct alloc_block *b = pool_last(p), *next = NULL; b; next = b, b = pool_prev(p, b), n++)
        if (next && !block_less(b, next))
            return "backward walk out of order";
    if (n != model_count())
        return "backward walk misses or repeats blocks";
    return NULL;
}

static uint64_t random_size(void)
{
    switch (rnd() % 6) {
    case 0: return 1 + rnd() % 200;                    /* below and around the first classes */
    case 1: return 512 * (1 + rnd() % 2048);            /* small pool */
    case 2: return 512 * (2048 + rnd() % 40960);        /* large pool */
    case 3: return (1 + rnd() % 4) * 8 * MiB;           /* repeated sizes: ties broken by address */
    case 4: return 1ULL << (10 + rnd() % 50);           /* class boundaries */
    default: return (1ULL << 62) - 512 * (rnd() % 4);   /* the largest sizes accepted */
    }
}

/* Three sizes in one class (14 MiB + 64 KiB, classes are 128 KiB wide there): a class of hundreds of blocks. */
static uint64_t one_class_size(void)
{
    return 14 * MiB + 64 * KiB + 512 * (rnd() % 3);
}

static void put(struct pool *p, int i, uint64_t stream, uint64_t size, uint64_t addr)
{
    blocks[i] = (struct alloc_block){.stream = stream, .size = size, .addr = addr, .mapped = true};
    pool_insert(p, &blocks[i]);
    present[i] = true;
}

static void worked(void)
{
    struct pool p = {0};
    put(&p, 0, 0, 512, 0x9000);
    put(&p, 1, 0, 1024, 0x2000);
    put(&p, 2, 0, 1024, 0x1000);
    put(&p, 3, 0, 40 * MiB, 0x8000);
    put(&p, 4, 7, 4096, 0x3000);
    ok(pool_lower_bound(&p, 0, 600, 0) == &blocks[2], "best fit: smallest size >= request, lowest address on ties");
    ok(pool_lower_bound(&p, 0, 1024, 0x1001) == &blocks[1], "lower_bound on (size, address) inside one size");
    ok(pool_lower_bound(&p, 0, 2048, 0) == &blocks[3], "a request between classes finds the next non-empty class");
    ok(pool_lower_bound(&p, 0, 41 * MiB, 0) == &blocks[4], "past a stream's largest block: the next stream's first");
    ok(pool_lower_bound(&p, 3, 1, 0) == &blocks[4], "a stream without blocks: the next stream's first");
    ok(pool_lower_bound(&p, 8, 1, 0) == NULL, "past every stream: none");
    ok(pool_prev(&p, &blocks[4]) == &blocks[3], "prev crosses back into the previous stream");
    ok(pool_next(&p, &blocks[3]) == &blocks[4], "next crosses into the next stream");
    pool_shrink_front(&p, &blocks[3], 0x8000 + 39 * MiB); /* 1 MiB left, in another class */
    ok(pool_lower_bound(&p, 0, 2048, 0) == &blocks[3] && blocks[3].size == MiB && blocks[3].addr == 0x8000 + 39 * MiB,
       "a shrunk block is found at its new size and address");
    pool_remove(&p, &blocks[2]);
    ok(pool_lower_bound(&p, 0, 600, 0) == &blocks[1], "a removed block is not found");
    pool_free(&p);
    memset(present, 0, sizeof present);
}

/* A class of equal sizes, filled at both ends and between: best fit returns its first (lowest address), and
 * removing or moving an end hands that role to its neighbour. */
static void class_ends(void)
{
    const uint64_t S = 14 * MiB + 64 * KiB;
    struct pool p = {0};
    put(&p, 0, 0, S, 0x5000);          /* empty class */
    put(&p, 1, 0, S, 0x7000);          /* after the last */
    put(&p, 2, 0, S, 0x3000);          /* before the first */
    put(&p, 3, 0, S, 0x6000);          /* between: a descent */
    put(&p, 4, 0, S, 0x1000);          /* before the first */
    put(&p, 5, 0, S, 0x9000);          /* after the last */
    put(&p, 6, 0, 40 * MiB, 0x100000); /* the next class */
    ok(pool_lower_bound(&p, 0, S, 0) == &blocks[4], "equal sizes: best fit is the lowest address, 0x1000");
    ok(pool_lower_bound(&p, 0, S - 512, 0) == &blocks[4], "a smaller request in the class: its first block");
    ok(pool_lower_bound(&p, 0, S, 0x5001) == &blocks[3], "(size, 0x5001) inside the class: 0x6000");
    ok(pool_lower_bound(&p, 0, S, 0x9001) == &blocks[6], "(size, 0x9001) past the class's last: the next class");
    ok(pool_lower_bound(&p, 0, S + 512, 0) == &blocks[6], "a larger request in the same class: the next class");
    uint64_t order[7], want[7] = {0x1000, 0x3000, 0x5000, 0x6000, 0x7000, 0x9000, 0x100000};
    int n = 0;
    for (struct alloc_block *b = pool_first(&p); b && n < 7; b = pool_next(&p, b))
        order[n++] = b->addr;
    ok(n == 7 && !memcmp(order, want, sizeof want), "walk: 0x1000 0x3000 0x5000 0x6000 0x7000 0x9000, then 40 MiB");
    ok(pool_prev(&p, &blocks[6]) == &blocks[5], "back from the next class: the class's last, 0x9000");
    pool_remove(&p, &blocks[4]);
    present[4] = false;
    ok(pool_lower_bound(&p, 0, S, 0) == &blocks[2], "the first removed: best fit is its successor, 0x3000");
    pool_remove(&p, &blocks[5]);
    present[5] = false;
    ok(pool_prev(&p, &blocks[6]) == &blocks[1], "the last removed: its predecessor 0x7000 is the class's last");
    ok(pool_lower_bound(&p, 0, S, 0x7001) == &blocks[6], "(size, 0x7001): past the new last");
    pool_shrink_front(&p, &blocks[1], 0x7000 + 512); /* S - 512 sorts before every S: moves to the front */
    ok(pool_lower_bound(&p, 0, S - 512, 0) == &blocks[1] && pool_prev(&p, &blocks[6]) == &blocks[3],
       "the last shrunk by 512 bytes: the class's first (0x7200), and 0x6000 its last");
    pool_shrink_front(&p, &blocks[1], 0x7000 + 1024); /* the first stays first: shrunk in place */
    ok(pool_lower_bound(&p, 0, S - 1024, 0) == &blocks[1] && pool_lower_bound(&p, 0, S - 511, 0) == &blocks[2],
       "the first shrunk again in place: still found first; S - 511 finds 0x3000");
    const char *bad = check_walks(&p);
    ok(!bad, "walks in order after the ends changed%s%s", bad ? ": " : "", bad ? bad : "");
    for (int i = 0; i < 4; i++) { /* the class emptied, then refilled: ends from before must not count */
        pool_remove(&p, &blocks[i]);
        present[i] = false;
    }
    put(&p, 7, 0, S, 0x8000);
    put(&p, 8, 0, S, 0x4000); /* its second block: before the first, 0x8000 */
    put(&p, 9, 0, S, 0xa000); /* after the last */
    ok(pool_lower_bound(&p, 0, S, 0) == &blocks[8] && pool_prev(&p, &blocks[6]) == &blocks[9],
       "refilled class: best fit 0x4000, last 0xa000");
    ok(pool_lower_bound(&p, 0, S, 0x4001) == &blocks[7], "refilled class: (size, 0x4001) finds 0x8000");
    bad = check_walks(&p);
    ok(!bad, "walks in order after the class was emptied and refilled%s%s", bad ? ": " : "", bad ? bad : "");
    pool_free(&p);
    memset(present, 0, sizeof present);
}

/* put_back: half the time, the block last removed is the one picked, so that it goes back where it was. */
static void randomized(uint64_t (*size_of)(void), bool put_back, const char *what)
{
    struct pool p = {0};
    const uint64_t streams[] = {0, 1, 7, 1ULL << 63};
    const char *bad = NULL;
    long bad_at = -1, lookups = 0, lookup_bad = -1;
    int removed = -1;
    for (long op = 0; op < 60000 && !bad; op++) {
        int i = (int)(rnd() % NBLOCKS);
        if (put_back && removed >= 0 && rnd() % 2)
            i = removed;
        if (!present[i]) {
            put(&p, i, streams[rnd() % 4], size_of(), (uint64_t)i << 40); /* addresses unique per block */
        } else if (rnd() % 3 == 0 && blocks[i].size > 1) {
            uint64_t cut = 1 + rnd() % (blocks[i].size - 1);
            pool_shrink_front(&p, &blocks[i], blocks[i].addr + cut);
        } else {
            pool_remove(&p, &blocks[i]);
            present[i] = false;
            removed = i;
        }
        uint64_t stream = streams[rnd() % 4] + (rnd() % 8 == 0), size = size_of();
        uint64_t addr = rnd() % 2 ? 0 : (rnd() % NBLOCKS) << 40;
        lookups++;
        if (pool_lower_bound(&p, stream, size, addr) != model_lower_bound(stream, size, addr) && lookup_bad < 0)
            lookup_bad = op;
        if (op % 500 == 0 && (bad = check_walks(&p)))
            bad_at = op;
    }
    if (!bad && (bad = check_walks(&p)))
        bad_at = 60000;
    ok(lookup_bad < 0, "%s: %ld random lookups agree with the brute-force lower_bound (first disagreement at op %ld)",
       what, lookups, lookup_bad);
    ok(!bad, "%s: walks in (stream, size, address) order after random changes%s%s (op %ld)", what, bad ? ": " : "",
       bad ? bad : "", bad_at);
    pool_free(&p);
    memset(present, 0, sizeof present);
}

int main(void)
{
    worked();
    class_ends();
    randomized(random_size, false, "sizes of every range");
    randomized(one_class_size, false, "three sizes of one class");
    randomized(one_class_size, true, "three sizes of one class, removed blocks put back");
    return done_testing();
}
