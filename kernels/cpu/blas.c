/* blas.c: dlopen of the BLAS on first use (blas.h). */
#include "cpu/blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef OOMLAB_BLAS_LIB
#define OOMLAB_BLAS_LIB "libopenblas.so.0"
#endif

blas_sgemm_fn *blas_sgemm;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512]; /* why the load failed; empty when it worked */

static void load(void)
{
    const char *lib = getenv("OOMLAB_BLAS");
    if (!lib || !*lib)
        lib = OOMLAB_BLAS_LIB;
    /* RTLD_LOCAL: the BLAS's symbols (and those of the libraries it brings) stay out of the global scope */
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load the BLAS: %s", why ? why : lib);
        return;
    }
    blas_sgemm = (blas_sgemm_fn *)dlsym(h, "cblas_sgemm");
    if (!blas_sgemm) {
        snprintf(load_error, sizeof load_error, "cannot load the BLAS: %s has no cblas_sgemm", lib);
        dlclose(h);
    }
}

int blas_load(struct err *e)
{
    pthread_once(&load_once, load);
    if (!blas_sgemm)
        return err_set(e, ERR_INTERNAL, "%s (set OOMLAB_BLAS to a library that exports cblas_sgemm)", load_error);
    return 0;
}
