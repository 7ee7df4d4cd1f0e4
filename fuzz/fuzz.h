/* fuzz.h: how a fuzz target is declared. Built by `make fuzz` (clang, libFuzzer, ASan + UBSan),
 * FUZZ_TARGET(name) is libFuzzer's LLVMFuzzerTestOneInput; built into tests/fuzz_replay_test.c
 * (-DFUZZ_REPLAY, the ordinary test build) it is fuzz_NAME, which the test runs on every committed
 * input under tests/data/fuzz/NAME/ and fuzz/seeds/NAME/. A target returns 0; it calls abort() (via
 * fuzz_require) when an invariant of the code under test fails, which the fuzzer reports as a crash. */
#ifndef OOMLAB_FUZZ_H
#define OOMLAB_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef FUZZ_REPLAY
#define FUZZ_TARGET(name) int fuzz_##name(const uint8_t *data, size_t size)
#else
#define FUZZ_TARGET(name) int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
#endif

/* Aborts with a message when `cond` is false. */
#define fuzz_require(cond, ...)                                                                       \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "fuzz invariant failed at %s:%d: ", __FILE__, __LINE__);                 \
            fprintf(stderr, __VA_ARGS__);                                                            \
            fputc('\n', stderr);                                                                     \
            abort();                                                                                 \
        }                                                                                            \
    } while (0)

/* The input as a NUL-terminated string (freed by the caller), or NULL when out of memory. */
static inline char *fuzz_string(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s) {
        for (size_t i = 0; i < size; i++)
            s[i] = (char)data[i];
        s[size] = '\0';
    }
    return s;
}

#endif
