/* blas.h: the BLAS, loaded at run time. oomlab links no BLAS: the first kernel that needs one (a GEMM,
 * attention) loads it with dlopen, as the CUDA plugin is loaded, so a process that runs no
 * host kernel (sim runs, replays) never maps OpenBLAS, its threads or the Fortran runtime it brings.
 * The library is $OOMLAB_BLAS when set (any library exporting cblas_sgemm), else the OpenBLAS the
 * build found (OOMLAB_BLAS_LIB). */
#ifndef OOMLAB_CPU_BLAS_H
#define OOMLAB_CPU_BLAS_H

#include <cblas.h>

#include "util/err.h"

typedef void blas_sgemm_fn(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                           const blasint m, const blasint n, const blasint k, const float alpha, const float *a,
                           const blasint lda, const float *b, const blasint ldb, const float beta, float *c,
                           const blasint ldc);

/* Loads the BLAS once per process (thread-safe): 0, or -1 with an ERR_INTERNAL message naming the library
 * and why it could not be loaded. Every later call returns the first answer. */
int blas_load(struct err *e);

/* cblas_sgemm of the loaded BLAS; call only after blas_load() returned 0. */
extern blas_sgemm_fn *blas_sgemm;

#endif
