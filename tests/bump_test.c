/* bump_test.c: the bump allocator (util/bump.h): aligned pieces that do not overlap, within a chunk and across
 * chunks, a large request in a chunk of its own without losing the head's room, and freeing all. */
#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "util/bump.h"

int main(void)
{
    struct bump b = {0};
    const size_t align = _Alignof(max_align_t);
    char *prev = NULL;
    size_t prev_n = 0;
    int aligned = 1, apart = 1;
    for (size_t i = 0; i < 5000; i++) { /* ~ 5000 * 40 bytes: several 64 KiB chunks */
        size_t n = 1 + i % 77;
        char *p = bump_alloc(&b, n);
        if (!p)
            return ok(0, "bump_alloc %zu bytes", n), done_testing();
        memset(p, (int)(i & 0xff), n);
        aligned &= (uintptr_t)p % align == 0;
        if (prev && p > prev && p < prev + prev_n) /* same chunk: past the previous piece */
            apart = 0;
        prev = p;
        prev_n = n;
    }
    ok(aligned, "every piece aligned to %zu", align);
    ok(apart, "pieces do not overlap");

    char *small = bump_alloc(&b, 8);
    char *big = bump_alloc(&b, 1 << 20);
    char *next = bump_alloc(&b, 8);
    ok(big != NULL, "a 1 MiB request");
    memset(big, 1, 1 << 20);
    ok(next == small + align, "the head keeps filling after a large request (%p, %p)", (void *)small, (void *)next);

    bump_free_all(&b);
    ok(b.chunks == NULL && b.at == b.end, "free_all empties it");
    char *again = bump_alloc(&b, 16);
    ok(again != NULL && (uintptr_t)again % align == 0, "usable after free_all");
    bump_free_all(&b);
    return done_testing();
}
