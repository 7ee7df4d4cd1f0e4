/* map_array_test.c: the generator's arrays grown by mremap (util/map_array.h): capacity in 16 KiB
 * stretches of elements, contents kept across growth (also past the first mapping and when asked for far
 * more than twice), new elements zero, the stretches past the first prefaulted (resident before any touch,
 * on a kernel with MADV_POPULATE_WRITE) and the first not, and refusals (elements over a page, sizes that
 * overflow) leave the array as it was. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"
#include "util/map_array.h"

struct elem {
    uint64_t a;
    uint32_t b;
    uint8_t c[13]; /* 25 bytes padded to 32 */
};

static int all_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i])
            return 0;
    return 1;
}

/* How many of the pages of [p, p + n) (page-aligned) are resident. */
static size_t resident(const void *p, size_t n, size_t page)
{
    unsigned char v[64];
    size_t pages = n / page, count = 0;
    if (pages > sizeof v || mincore((void *)p, n, v) != 0)
        return (size_t)-1;
    for (size_t i = 0; i < pages; i++)
        count += v[i] & 1;
    return count;
}

/* Whether this kernel populates pages on MADV_POPULATE_WRITE (Linux 5.14 on): map_array's prefaulting is
 * best effort, and without it only the contents are checked. */
static int kernel_populates(size_t page)
{
    void *m = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    int yes = madvise(m, page, MADV_POPULATE_WRITE) == 0;
    munmap(m, page);
    return yes;
}

int main(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct elem *v = NULL;
    size_t cap = 0;
    is_int(map_array_grow((void **)&v, &cap, 0, sizeof *v), 0, "nothing needed: nothing mapped");
    ok(v == NULL && cap == 0, "still empty");
    is_int(map_array_grow((void **)&v, &cap, 1, sizeof *v), 0, "one element");
    const size_t step = 16 * 1024;
    is_u64(cap, step / sizeof *v, "the first stretch: 16 KiB of elements");
    const int populates = kernel_populates(page);
    if (populates)
        is_u64(resident(v, step, page), 0, "the first stretch is not prefaulted");
    else
        ok(1, "residency # SKIP MADV_POPULATE_WRITE unsupported by this kernel");
    ok(all_zero(v, cap * sizeof *v), "a new mapping reads as zeros");
    for (size_t i = 0; i < cap; i++)
        v[i] = (struct elem){.a = i * 7919, .b = (uint32_t)i};
    size_t first = cap;
    struct elem *before = v;
    is_int(map_array_grow((void **)&v, &cap, first / 2, sizeof *v), 0, "within capacity");
    ok(v == before && cap == first, "within capacity: the same array");
    is_int(map_array_grow((void **)&v, &cap, first + 1, sizeof *v), 0, "one past capacity");
    is_u64(cap, 2 * first, "one stretch more");
    ok(v == before, "within the first mapping: not moved");
    if (populates)
        is_u64(resident(v + first, step, page), step / page, "the second stretch prefaulted, before any touch");
    else
        ok(1, "residency # SKIP MADV_POPULATE_WRITE unsupported by this kernel");
    is_int(map_array_grow((void **)&v, &cap, cap + 1, sizeof *v), 0, "a third stretch");
    is_int(map_array_grow((void **)&v, &cap, cap + 1, sizeof *v), 0, "a fourth stretch: the first mapping full");
    is_u64(cap, 4 * first, "64 KiB of elements");
    for (size_t i = first; i < cap; i++)
        v[i] = (struct elem){.a = i * 7919, .b = (uint32_t)i};
    first = cap;
    is_int(map_array_grow((void **)&v, &cap, first + 1, sizeof *v), 0, "past the first mapping");
    is_u64(cap, first + step / sizeof *v, "one stretch more past the first mapping");
    int kept = 1;
    for (size_t i = 0; i < first; i++)
        kept &= v[i].a == i * 7919 && v[i].b == (uint32_t)i;
    ok(kept, "every element kept across growth");
    ok(all_zero(v + first, (cap - first) * sizeof *v), "the grown part reads as zeros");

    size_t far = 10 * cap + 3;
    is_int(map_array_grow((void **)&v, &cap, far, sizeof *v), 0, "far more than twice");
    ok(cap >= far && cap * sizeof *v % page < sizeof *v, "enough, in whole pages (less than one element spare)");
    kept = v[first - 1].a == (first - 1) * 7919;
    ok(kept, "the last element of the first mapping kept");
    v[far - 1].b = 42;

    size_t odd_cap = 0;
    char (*odd)[3000] = NULL;
    is_int(map_array_grow((void **)&odd, &odd_cap, 100, sizeof *odd), 0, "elements not dividing a page");
    ok(odd_cap >= 100 && (odd_cap + 1) * sizeof *odd > (odd_cap * sizeof *odd + page - 1) / page * page,
       "3000-byte elements: what fits the pages mapped");
    (*odd)[0] = 1;
    odd[odd_cap - 1][2999] = 1; /* the last byte of capacity is mapped */
    map_array_free(odd, odd_cap, sizeof *odd);

    struct elem *keep = v;
    size_t keep_cap = cap;
    is_int(map_array_grow((void **)&v, &cap, SIZE_MAX / 4, sizeof *v), -1, "an overflowing size is refused");
    ok(v == keep && cap == keep_cap && v[far - 1].b == 42, "refused: the array as it was");
    void *big = NULL;
    size_t big_cap = 0;
    is_int(map_array_grow(&big, &big_cap, 1, page + 1), -1, "an element over a page is refused");
    ok(big == NULL && big_cap == 0, "refused: still empty");
    map_array_free(v, cap, sizeof *v);
    map_array_free(NULL, 0, sizeof *v);
    ok(1, "freed");

    /* Arrays grown in turn by uneven amounts, so their mappings lie side by side: freeing one unmaps its
     * whole mapping and nothing of its neighbours' (a wrong length would leave pages behind, or take a
     * neighbour's, which the reads after would fault on). */
    enum { K = 6 };
    uint32_t *arr[K] = {0};
    size_t caps[K] = {0}, used[K] = {0};
    uint64_t seed = 42;
    int grew = 1;
    for (int round = 0; round < 400 && grew; round++) {
        int k = round % K;
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        size_t need = used[k] + 1 + (size_t)(seed >> 33) % (k == 0 ? 40000 : 3000);
        grew = map_array_grow((void **)&arr[k], &caps[k], need, sizeof **arr) == 0 && caps[k] >= need;
        for (size_t i = used[k]; grew && i < need; i++)
            arr[k][i] = (uint32_t)(i * 31 + (size_t)k);
        used[k] = need;
    }
    ok(grew, "six arrays grown in turn");
    int intact = 1;
    for (int k = 0; k < K; k += 2)
        map_array_free(arr[k], caps[k], sizeof **arr);
    for (int k = 1; k < K; k += 2)
        for (size_t i = 0; i < used[k]; i++)
            intact &= arr[k][i] == (uint32_t)(i * 31 + (size_t)k);
    ok(intact, "freeing every other array leaves the rest intact");
    int gone = 1;
    for (int k = 0; k < K; k += 2) {
        unsigned char vec;
        size_t last = (caps[k] * sizeof **arr - 1) / page * page; /* the last usable page */
        gone &= mincore((char *)arr[k] + last, page, &vec) != 0;
    }
    ok(gone, "their last usable pages are unmapped");
    for (int k = 1; k < K; k += 2)
        map_array_free(arr[k], caps[k], sizeof **arr);
    return done_testing();
}
