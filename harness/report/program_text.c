/* program_text.c: printing op programs in oomlab's one text form (see program_text.h), which
 * replay/text_trace.c reads back. */
#include "report/program_text.h"

#include "kernels.h"

static const char *tag(const struct op *op)
{
    return op->name && op->name[0] ? op->name : "-";
}

/* The four scalar parameters, trailing zeros left out; nothing when all are zero. */
static void print_fparams(FILE *f, const struct kernel_call *k)
{
    int n = 4;
    while (n > 0 && k->fparam[n - 1] == 0.0f)
        n--;
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.9g", i ? "," : " f=", (double)k->fparam[i]);
}

static void print_kernel(FILE *f, const struct op *op)
{
    const struct kernel_call *k = &op->kernel;
    const struct kernel_desc *d = kernel_get(k->kernel);
    fprintf(f, "kernel %s %s", d ? d->name : "?", dtype_name((enum dtype)k->dtype));
    for (int i = 0; d && i < KERNEL_MAX_DIMS && d->dim_names[i]; i++)
        fprintf(f, " %s=%lld", d->dim_names[i], (long long)k->dims[i]);
    print_fparams(f, k);
    for (unsigned i = 0; i < k->ntensors && i < KERNEL_MAX_TENSORS; i++)
        fprintf(f, " t%llu", (unsigned long long)k->tensors[i]);
    fprintf(f, " %s\n", tag(op));
}

void op_print(FILE *f, const struct op *op)
{
    const char *verb = op_kind_name(op->kind);
    switch (op->kind) {
    case OP_ALLOC:
    case OP_MANAGED_ALLOC:
        fprintf(f, "%s t%llu %llu s%d %s %s\n", verb, (unsigned long long)op->id,
                (unsigned long long)op->bytes, op->stream, category_name((enum category)op->category), tag(op));
        return;
    case OP_FREE: fprintf(f, "free t%llu\n", (unsigned long long)op->id); return;
    case OP_KERNEL: print_kernel(f, op); return;
    case OP_PHASE:
    case OP_MARK: fprintf(f, "%s %s\n", verb, op->name); return;
    case OP_STEP:
        fprintf(f, "step %llu samples %llu\n", (unsigned long long)op->id, (unsigned long long)op->bytes);
        return;
    case OP_SEGMENT_ALLOC:
    case OP_SEGMENT_FREE:
    case OP_SEGMENT_MAP:
    case OP_SEGMENT_UNMAP:
        fprintf(f, "%s 0x%llx %llu s%d\n", verb, (unsigned long long)op->id, (unsigned long long)op->bytes,
                op->stream);
        return;
    case OP_RECORDED_OOM:
        fprintf(f, "oom %llu s%d%s%s\n", (unsigned long long)op->bytes, op->stream, op->name ? " " : "",
                op->name ? op->name : "");
        return;
    case OP_EMPTY_CACHE:
    case OP_RESET_PEAK:
    case OP_RESET_ACCUMULATED:
    case OP_KIND_COUNT: break;
    }
    fprintf(f, "%s\n", verb);
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
