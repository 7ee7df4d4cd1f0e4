/* program_text.h: the op program as text, one op per line: what `oomlab program` prints, so a change
 * to the generator shows up as a diff, and what `oomlab replay` reads back (replay/text_trace.c):
 *
 *     phase forward
 *     step 1 samples 8
 *     alloc t42 3145728 s0 activation encoder.block.0.layer.0.SelfAttention.q
 *     kernel gemm bf16 M=4096 N=2048 K=2048 transA=0 transB=1 t17 t42 t43 encoder.block.0.layer.0.SelfAttention.q
 *     kernel dropout_fwd fp32 n=4096 seed=7 f=0.100000001 t3 t4 t5 encoder.dropout
 *     free t42
 *     empty_cache
 *     mark eval-begin
 *     segment_alloc 0x7f3a00000000 20971520 s0      (what a snapshot recorded of the driver)
 *
 * Kernel scalars (f=) are printed with 9 significant digits, so they read back to the same float. */
#ifndef OOMLAB_PROGRAM_TEXT_H
#define OOMLAB_PROGRAM_TEXT_H

#include <stdio.h>

#include "program/program.h"

void op_print(FILE *f, const struct op *op);

/* A sink that prints every op to f. */
struct text_sink {
    struct op_sink sink;
    FILE *f;
};
void text_sink_init(struct text_sink *s, FILE *f);

#endif
