/* err.h: error values returned up the call chain with their context (file, position, cause).
 * Functions that can fail take a `struct err *` and return -1 after err_set(); only main() exits. */
#ifndef OOMLAB_ERR_H
#define OOMLAB_ERR_H

enum err_code {
    ERR_NONE = 0,
    ERR_EXPECT = 1,  /* an expectation failed (exit code 1) */
    ERR_INPUT = 2,   /* bad input or usage (exit code 2) */
    ERR_INTERNAL = 3 /* internal or device error (exit code 3) */
};

struct err {
    enum err_code code;
    char msg[1024];
};

/* Sets the error (first one wins) and returns -1, so callers can write `return err_set(...)`. */
int err_set(struct err *e, enum err_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes context to an existing message ("file.yaml: " + msg) and returns -1. */
int err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
