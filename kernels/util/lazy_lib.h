/* lazy_lib.h: a shared library opened on first use (dlopen) rather than linked, so that a process that never
 * needs it does not pay for mapping and relocating it and what it brings at every start. The caller lists
 * the symbols it uses with the pointer each one is stored in, and loads before the first call (see
 * report/cairo_lib.c). It lives in kernels/, which includes nothing of harness/, so that the kernels
 * (cpu/dnnl_lib.c) and the harness share it. */
#ifndef OOMLAB_LAZY_LIB_H
#define OOMLAB_LAZY_LIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

struct lazy_symbol {
    const char *name;
    void **slot; /* where the symbol's address goes */
};

struct lazy_lib {
    const char *soname, *what; /* "libcairo.so.2", "cairo for pictures" */
    const struct lazy_symbol *syms;
    size_t nsyms;
    pthread_mutex_t lock;
    bool tried;
    char why[512]; /* why the load failed; empty when it worked */
};

#define LAZY_LIB_INIT(soname_, what_, syms_)                                                                \
    {.soname = (soname_), .what = (what_), .syms = (syms_), .nsyms = sizeof(syms_) / sizeof((syms_)[0]),    \
     .lock = PTHREAD_MUTEX_INITIALIZER}

/* Opens the library the first time (later calls give the first one's answer) and fills every slot: 0, or
 * -1 with e (ERR_INTERNAL) naming the library or the symbol missing, every slot left as it was. */
int lazy_lib_load(struct lazy_lib *l, struct err *e);

#endif
