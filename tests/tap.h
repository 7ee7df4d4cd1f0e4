/* tap.h: a minimal Test Anything Protocol emitter for oomlab's C test programs (run by prove). */
#ifndef OOMLAB_TAP_H
#define OOMLAB_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count, tap_failed;
static const char *tap_todo; /* while set, tests are TODO (known to fail, for this reason): not counted as failures */

static inline int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#include <stdarg.h>
static inline int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    tap_count++;
    printf("%sok %d - ", cond ? "" : "not ", tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (tap_todo)
        printf(" # TODO %s", tap_todo);
    printf("\n");
    if (!cond && !tap_todo) {
        tap_failed++;
        printf("#   Failed test at %s line %d\n", file, line);
    }
    fflush(stdout);
    return cond;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...)                                                          \
    do {                                                                                \
        long long g_ = (long long)(got), w_ = (long long)(want);                        \
        if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__))                         \
            printf("#          got: %lld\n#     expected: %lld\n", g_, w_);             \
    } while (0)

#define is_u64(got, want, ...)                                                          \
    do {                                                                                \
        unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want); \
        if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__))                         \
            printf("#          got: %llu\n#     expected: %llu\n", g_, w_);             \
    } while (0)

#define is_str(got, want, ...)                                                          \
    do {                                                                                \
        const char *g_ = (got), *w_ = (want);                                           \
        if (!tap_ok(g_ && w_ && strcmp(g_, w_) == 0, __FILE__, __LINE__, __VA_ARGS__))  \
            printf("#          got: '%s'\n#     expected: '%s'\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
    } while (0)

#define diag(...) (printf("# "), printf(__VA_ARGS__), printf("\n"))

static inline void tap_skip_all(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    exit(0);
}

static inline int done_testing(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}

/* Path of a file in ../shared, from OOMLAB_SHARED (set by make test) or the default beside the repo. */
static inline const char *tap_shared_path(const char *rel, char *buf, size_t n)
{
    const char *root = getenv("OOMLAB_SHARED");
    snprintf(buf, n, "%s/%s", root && *root ? root : "../shared", rel);
    return buf;
}

#endif
