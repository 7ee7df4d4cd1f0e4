/* dnnl_lib.h: oneDNN (libdnnl.so.2, the C API of oneDNN 2.x) opened on the first convolution (util/lazy_lib.h),
 * so that sim runs, replays and host runs without one never map it, its OpenMP runtime or its threads.
 * Include this instead of <dnnl.h>: each oneDNN function conv.c calls is a pointer in dnnl_lib, and the
 * function's name stands for that pointer, so calls read as plain oneDNN. Call dnnl_lib_load (cheap once
 * loaded) before the first oneDNN call. */
#ifndef OOMLAB_DNNL_LIB_H
#define OOMLAB_DNNL_LIB_H

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "util/err.h"

#define DNNL_LIB_FUNCTIONS(X)                                                                                \
    X(dnnl_convolution_backward_data_desc_init) X(dnnl_convolution_backward_weights_desc_init)               \
    X(dnnl_convolution_forward_desc_init) X(dnnl_engine_create) X(dnnl_memory_create)                        \
    X(dnnl_memory_desc_equal) X(dnnl_memory_desc_get_size) X(dnnl_memory_desc_init_by_tag)                  \
    X(dnnl_memory_destroy) X(dnnl_primitive_create) X(dnnl_primitive_desc_create)                            \
    X(dnnl_primitive_desc_destroy) X(dnnl_primitive_desc_query_md) X(dnnl_primitive_destroy)                 \
    X(dnnl_primitive_execute) X(dnnl_reorder_primitive_desc_create) X(dnnl_status2str) X(dnnl_stream_create) \
    X(dnnl_stream_destroy) X(dnnl_stream_wait)

#define DNNL_LIB_MEMBER(f) __typeof__(f) *f;
struct dnnl_lib {
    DNNL_LIB_FUNCTIONS(DNNL_LIB_MEMBER)
    /* the OpenMP runtime oneDNN runs on (Debian's libdnnl2 is built with DNNL_CPU_RUNTIME=OMP, libgomp):
     * the threads of the calling thread's next parallel regions */
    void (*omp_set_num_threads)(int);
};
#undef DNNL_LIB_MEMBER
extern struct dnnl_lib dnnl_lib;

/* 0, or -1 with e set when oneDNN cannot be loaded ($OOMLAB_DNNL when set, else libdnnl.so.2, not found, or
 * without a symbol above or the OpenMP runtime's omp_set_num_threads); then also the CPU engine, created
 * once: dnnl_lib_engine(). */
int dnnl_lib_load(struct err *e);
/* The CPU engine; call only after dnnl_lib_load returned 0. */
dnnl_engine_t dnnl_lib_engine(void);

/* From here on, dnnl_stream_create(...) is dnnl_lib.dnnl_stream_create(...); dnnl_lib.c, which fills the
 * table, goes without. */
#ifndef DNNL_LIB_FILL
#define dnnl_convolution_backward_data_desc_init dnnl_lib.dnnl_convolution_backward_data_desc_init
#define dnnl_convolution_backward_weights_desc_init dnnl_lib.dnnl_convolution_backward_weights_desc_init
#define dnnl_convolution_forward_desc_init dnnl_lib.dnnl_convolution_forward_desc_init
#define dnnl_engine_create dnnl_lib.dnnl_engine_create
#define dnnl_memory_create dnnl_lib.dnnl_memory_create
#define dnnl_memory_desc_equal dnnl_lib.dnnl_memory_desc_equal
#define dnnl_memory_desc_get_size dnnl_lib.dnnl_memory_desc_get_size
#define dnnl_memory_desc_init_by_tag dnnl_lib.dnnl_memory_desc_init_by_tag
#define dnnl_memory_destroy dnnl_lib.dnnl_memory_destroy
#define dnnl_primitive_create dnnl_lib.dnnl_primitive_create
#define dnnl_primitive_desc_create dnnl_lib.dnnl_primitive_desc_create
#define dnnl_primitive_desc_destroy dnnl_lib.dnnl_primitive_desc_destroy
#define dnnl_primitive_desc_query_md dnnl_lib.dnnl_primitive_desc_query_md
#define dnnl_primitive_destroy dnnl_lib.dnnl_primitive_destroy
#define dnnl_primitive_execute dnnl_lib.dnnl_primitive_execute
#define dnnl_reorder_primitive_desc_create dnnl_lib.dnnl_reorder_primitive_desc_create
#define dnnl_status2str dnnl_lib.dnnl_status2str
#define dnnl_stream_create dnnl_lib.dnnl_stream_create
#define dnnl_stream_destroy dnnl_lib.dnnl_stream_destroy
#define dnnl_stream_wait dnnl_lib.dnnl_stream_wait
#define omp_set_num_threads dnnl_lib.omp_set_num_threads
#endif

#endif
