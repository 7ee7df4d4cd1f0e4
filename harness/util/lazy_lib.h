/* lazy_lib.h: a shared library opened on first use (dlopen) rather than linked, so that a process that never
 * needs it does not pay for mapping and relocating it and what it brings at every start. The caller lists
 * the symbols it uses with the pointer each one is stored in (see report/cairo_lib.c). */
#ifndef OOMLAB_LAZY_LIB_H
#define OOMLAB_LAZY_LIB_H

#include <stddef.h>

struct lazy_symbol {
    const char *name;
    void **slot; /* where the symbol's address goes */
};

/* Opens soname (RTLD_LOCAL) and fills every slot: 0, or -1 with why[] saying what failed ("cannot load
 * WHAT: ..."), every slot left as it was and the library closed. Not thread-safe: call it under a
 * pthread_once. */
int lazy_lib_open(const char *soname, const char *what, const struct lazy_symbol *syms, size_t n, char *why,
                  size_t why_len);

#endif
