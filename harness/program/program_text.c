/* program_text.c: printing op programs (see program_text.h). Format:
 *     phase forward
 *     step 1
 *     alloc t42 3145728 s0 activation encoder.block.0.layer.0.SelfAttention.q
 *     kernel gemm bf16 M=4096 N=2048 K=2048 transB=1 t17 t42 t43 encoder.block.0.layer.0.SelfAttention.q
 *     free t42
 *     empty_cache
 *     mark eval-begin */
#include "program/program_text.h"

#include "kernels.h"

void op_print(FILE *f, const struct op *op)
{
    switch (op->kind) {
    case OP_ALLOC:
        fprintf(f, "alloc t%llu %llu s%d %s %s\n", (unsigned long long)op->id, (unsigned long long)op->bytes,
                op->stream, category_name((enum category)op->category), op->name ? op->name : "-");
        return;
    case OP_FREE: fprintf(f, "free t%llu\n", (unsigned long long)op->id); return;
    case OP_EMPTY_CACHE: fprintf(f, "empty_cache\n"); return;
    case OP_PHASE: fprintf(f, "phase %s\n", op->name); return;
    case OP_STEP:
        fprintf(f, "step %llu samples %llu\n", (unsigned long long)op->id, (unsigned long long)op->bytes);
        return;
    case OP_MARK: fprintf(f, "mark %s\n", op->name); return;
    case OP_KERNEL: break;
    }
    const struct kernel_call *k = &op->kernel;
    const struct kernel_desc *d = kernel_get(k->kernel);
    fprintf(f, "kernel %s %s", d ? d->name : "?", dtype_name((enum dtype)k->dtype));
    for (int i = 0; d && i < KERNEL_MAX_DIMS && d->dim_names[i]; i++)
        fprintf(f, " %s=%lld", d->dim_names[i], (long long)k->dims[i]);
    for (unsigned i = 0; i < k->ntensors && i < KERNEL_MAX_TENSORS; i++)
        fprintf(f, " t%llu", (unsigned long long)k->tensors[i]);
    fprintf(f, " %s\n", op->name ? op->name : "-");
}

static int print_op(struct op_sink *sink, const struct op *op, struct err *e)
{
    op_print(((struct text_sink *)sink)->f, op);
    return 0;
}

void text_sink_init(struct text_sink *s, FILE *f)
{
    s->sink.emit = print_op;
    s->f = f;
}
