/* compiled_act.c: the fix compiled_activations, what torch.compile (Inductor) makes of a gated MLP's
 * activation: act(gate) * up as one fused kernel whose output is the product, saving only its inputs
 * gate and up for backward (the partitioner recomputes act(gate) there instead of keeping it). Eager
 * PyTorch keeps act(gate) too, as the multiply's saved operand: one [tokens, intermediate] tensor per
 * layer, and one more forward temporary. The fix's settings hook does the same for GPT-2's `gelu_new`
 * composite (eight small ops saving three more tensors): compiled, it is one tanh-GELU kernel saving
 * its input. SiLU (SwiGLU) and GELU (GEGLU) gates are fused; other gates stay eager. */
#include "workload/compiled_act.h"

#include <string.h>

bool compiled_gate_fuses(enum act_kind act)
{
    return act == ACT_SILU || act == ACT_GELU || act == ACT_GELU_TANH;
}

tref nn_gated_compiled(struct gen *g, const char *name, tref gate, tref up, enum act_kind act)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    enum dtype dt = (enum dtype)g->t[gate].dtype;
    int64_t f = g->t[gate].dims[g->t[gate].ndim - 1];
    tref y = t_like(g, gate, dt, CAT_ACTIVATION, tag);
    bool silu = act == ACT_SILU;
    int64_t d[4] = {t_numel(g, gate) / f, f, 0, act == ACT_GELU_TANH};
    tref ts[3] = {gate, up, y};
    kern(g, silu ? K_SWIGLU_FWD : K_GEGLU_FWD, dt, d, silu ? 3 : 4, ts, 3, NULL, 0, tag);
    if (nn_records(g, t_rg(g, gate) || t_rg(g, up))) {
        struct node *n = tape_push(g, N_GATED, y, tag);
        if (n) {
            node_input(g, n, 0, gate);
            node_input(g, n, 1, up);
            node_save(g, n, 0, gate);
            node_save(g, n, 1, up);
            memcpy(n->a, d, sizeof d);
            n->a[4] = act;
        }
    }
    return y;
}

void nn_gated_compiled_backward(struct gen *g, const struct node *n, tref gy)
{
    enum dtype dt = (enum dtype)g->t[gy].dtype;
    tref dgate = t_like(g, n->saved[0], dt, CAT_TEMP, n->tag), dup = t_like(g, n->saved[1], dt, CAT_TEMP, n->tag);
    tref ts[5] = {n->saved[0], n->saved[1], gy, dgate, dup};
    bool silu = n->a[4] == ACT_SILU;
    kern(g, silu ? K_SWIGLU_BWD : K_GEGLU_BWD, dt, n->a, silu ? 3 : 4, ts, 5, NULL, 0, n->tag);
    grad_accumulate(g, n->in[0], dgate);
    grad_accumulate(g, n->in[1], dup);
}
