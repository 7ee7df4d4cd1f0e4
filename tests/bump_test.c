/* bump_test.c: the bump allocator (util/bump.h): aligned pieces that do not overlap, within a chunk and across
 * chunks, a large request in a chunk of its own without losing the head's room, a stretch's pages resident
 * as soon as a piece enters it, and freeing all. */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"
#include "util/bump.h"

/* Whether the page holding p is resident; -1 when mincore cannot tell. */
static int page_resident(const void *p)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    unsigned char v;
    return mincore((void *)((uintptr_t)p & ~(page - 1)), page, &v) == 0 ? v & 1 : -1;
}

/* Pieces of a fresh bump up to the second 16 KiB stretch of its first chunk: the stretch's pages are
 * prefaulted when the first piece enters it, before anything writes them (the chunk is fresh heap memory
 * in this small process; a kernel without MADV_POPULATE_WRITE skips the check). */
static void check_stretch(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *probe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int populates = probe != MAP_FAILED && madvise(probe, page, MADV_POPULATE_WRITE) == 0;
    if (probe != MAP_FAILED)
        munmap(probe, page);
    struct bump b = {0};
    char *first = bump_alloc(&b, 64), *p = first;
    const uintptr_t boundary = ((uintptr_t)first + 16 * 1024) & ~(uintptr_t)(16 * 1024 - 1);
    while (p && (uintptr_t)p < boundary)
        p = bump_alloc(&b, 64);
    ok(p != NULL, "pieces into the second stretch");
    if (populates)
        is_int(page_resident(p + 2 * page), 1, "a page of the stretch entered is resident before any write");
    else
        ok(1, "# SKIP MADV_POPULATE_WRITE unsupported by this kernel");
    bump_free_all(&b);
}

int main(void)
{
    check_stretch();
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
