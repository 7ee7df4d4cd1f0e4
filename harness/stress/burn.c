/* burn.c: churn's compute load (churn.burn_every): three fp32 buffers of burn_size^2 allocated before
 * the churn, then a GEMM C = A B every burn_every ops, run by the device as any kernel: cuBLAS on cuda,
 * the BLAS on the host, the kernel-time model on sim. Its ops are not the churn's: they are emitted to
 * the runner directly and counted apart (burn_gemms). */
#include "stress/stress_kind.h"

#include "kernels.h"

static int emit(struct stress_ctx *c, const struct op *op, struct err *e)
{
    struct op_sink *sink = runner_sink(c->run);
    return sink->emit(sink, op, e);
}

int stress_burn_start(struct stress_ctx *c, struct stress_burn *b, struct err *e)
{
    const struct churn_spec *ch = &c->p->churn;
    b->n = ch->burn_size;
    uint64_t bytes = (uint64_t)b->n * (uint64_t)b->n * 4;
    for (int i = 0; i < 3; i++) {
        b->ids[i] = ++c->next_id;
        struct op op = {.kind = OP_ALLOC, .id = b->ids[i], .bytes = bytes, .category = CAT_WORKSPACE, .name = "burn"};
        if (emit(c, &op, e)) {
            if (!runner_stopped_by_oom(c->run))
                return -1;
            char want[32];
            size_format_pytorch(3 * bytes, want, sizeof want);
            return err_set(e, ERR_INPUT, "%s: churn.burn_size %d: its three buffers (%s) do not fit the device",
                           c->p->path, b->n, want);
        }
    }
    return 0;
}

int stress_burn_gemm(struct stress_ctx *c, const struct stress_burn *b, struct err *e)
{
    struct op op = {.kind = OP_KERNEL, .name = "burn",
                    .kernel = {.kernel = K_GEMM, .dtype = DT_F32, .ntensors = 3, .dims = {b->n, b->n, b->n},
                               .tensors = {b->ids[0], b->ids[1], b->ids[2]}, .fparam = {1.0f, 0.0f}}};
    if (emit(c, &op, e))
        return -1;
    c->res->burn_gemms++;
    c->res->burn_flops += 2.0 * (double)b->n * (double)b->n * (double)b->n;
    return 0;
}

int stress_burn_end(struct stress_ctx *c, const struct stress_burn *b, struct err *e)
{
    for (int i = 0; i < 3; i++)
        if (emit(c, &(struct op){.kind = OP_FREE, .id = b->ids[i]}, e))
            return -1;
    return 0;
}
