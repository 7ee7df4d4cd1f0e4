/* strpool_test.c: the interning string pool (workload/strpool.h): equal strings give one pointer, the
 * strings stay intact and in place across table growth and many chunks of text, a string longer than a
 * chunk's stretch or a chunk, the empty string, and interning by length. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "workload/strpool.h"

int main(void)
{
    struct strpool *p = strpool_create();
    if (!p)
        tap_skip_all("no host memory");
    enum { N = 20000 }; /* ~ 20000 * 40 bytes: many 64 KiB chunks, the table grown several times */
    static const char *got[N];
    char buf[64];
    int all = 1;
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "double_blocks.%d.attn.to_q.weight", i);
        got[i] = strpool_intern(p, buf);
        all &= got[i] && got[i] != buf && strcmp(got[i], buf) == 0;
    }
    ok(all, "%d strings interned as copies", N);
    int same = 1, intact = 1;
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "double_blocks.%d.attn.to_q.weight", i);
        same &= strpool_intern(p, buf) == got[i];
        intact &= strcmp(got[i], buf) == 0;
    }
    ok(same, "interning again gives the same pointers");
    ok(intact, "every string intact after growth");
    ok(got[0] != got[1], "different strings, different pointers");

    size_t big_n = 100 * 1024;
    char *big = malloc(big_n + 1);
    if (!big)
        tap_skip_all("no host memory");
    memset(big, 'x', big_n);
    big[big_n] = '\0';
    const char *b1 = strpool_intern(p, big);
    ok(b1 && strlen(b1) == big_n, "a 100 KiB string");
    ok(strpool_intern(p, big) == b1, "the 100 KiB string interned once");
    const char *after = strpool_intern(p, "after the big one");
    ok(after && strcmp(after, "after the big one") == 0, "a short string after it");
    ok(strcmp(got[N - 1], "double_blocks.19999.attn.to_q.weight") == 0, "earlier strings untouched by it");
    free(big);

    const char *e = strpool_intern(p, "");
    ok(e && *e == '\0' && strpool_intern(p, "") == e, "the empty string");
    ok(strpool_intern_len(p, "after the big one", 17) == after, "by length: the same pointer as by text");
    ok(strpool_bytes(p) > (size_t)N * 30, "bytes held counts the text (%zu)", strpool_bytes(p));
    strpool_destroy(p);
    strpool_destroy(NULL);
    return done_testing();
}
