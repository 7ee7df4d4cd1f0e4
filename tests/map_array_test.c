/* map_array_test.c: the generator's arrays grown by mremap (workload/map_array.h): capacity in whole
 * pages of elements, contents kept across growth (also past the first mapping and when asked for far more
 * than twice), new elements zero, and refusals (elements over a page, sizes that overflow) leave the array
 * as it was. */
#include <stdint.h>
#include <unistd.h>

#include "tap.h"
#include "workload/map_array.h"

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

int main(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct elem *v = NULL;
    size_t cap = 0;
    is_int(map_array_grow((void **)&v, &cap, 0, sizeof *v), 0, "nothing needed: nothing mapped");
    ok(v == NULL && cap == 0, "still empty");
    is_int(map_array_grow((void **)&v, &cap, 1, sizeof *v), 0, "one element");
    is_u64(cap, 64 * 1024 / sizeof *v, "the first mapping: 64 KiB of elements");
    ok(all_zero(v, cap * sizeof *v), "a new mapping reads as zeros");
    for (size_t i = 0; i < cap; i++)
        v[i] = (struct elem){.a = i * 7919, .b = (uint32_t)i};
    size_t first = cap;
    struct elem *before = v;
    is_int(map_array_grow((void **)&v, &cap, first / 2, sizeof *v), 0, "within capacity");
    ok(v == before && cap == first, "within capacity: the same array");
    is_int(map_array_grow((void **)&v, &cap, first + 1, sizeof *v), 0, "one past capacity");
    is_u64(cap, 2 * first, "doubled");
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
    return done_testing();
}
