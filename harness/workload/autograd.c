/* autograd.c: the tape of autograd nodes recorded by the forward, and backward: nodes run in reverse,
 * each consuming its output's gradient, allocating its inputs' gradients, accumulating .grad, and
 * freeing what it saved. Checkpointed segments run their forward again here, then their backward. */
#include "workload/gen.h"
#include "util/map_array.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct node) == 152, "struct node: the tape's pages (gen.h)");

struct node *tape_push(struct gen *g, enum node_kind kind, tref out, const char *tag)
{
    if ((size_t)g->ntape == g->cap_tape &&
        map_array_grow((void **)&g->tape, &g->cap_tape, (size_t)g->ntape + 1, sizeof *g->tape) < 0) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory for the autograd tape");
        g->failed = 1;
        return NULL;
    }
    struct node *n = &g->tape[g->ntape++];
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->out = out;
    n->tag = tag;
    n->param[0] = n->param[1] = -1;
    for (int i = 0; i < NODE_MAX_IN; i++)
        n->in[i] = TNONE;
    for (int i = 0; i < NODE_MAX_SAVED; i++)
        n->saved[i] = TNONE;
    g->t[out].holds++;
    g->t[out].requires_grad = true;
    return n;
}

void node_save(struct gen *g, struct node *n, int slot, tref x)
{
    n->saved[slot] = t_ref(g, x);
}

void node_input(struct gen *g, struct node *n, int slot, tref x)
{
    if (x == TNONE || !g->t[x].requires_grad)
        return;
    n->in[slot] = x;
    g->t[x].holds++;
}

static void node_release(struct gen *g, const struct node *n)
{
    for (int i = 0; i < NODE_MAX_SAVED; i++)
        t_release(g, n->saved[i]);
    for (int i = 0; i < NODE_MAX_IN; i++)
        if (n->in[i] != TNONE) /* most slots are: no call for them */
            t_unhold(g, n->in[i]);
    t_unhold(g, n->out);
}

void tape_drop(struct gen *g, int32_t base)
{
    while (g->ntape > base) {
        struct node n = g->tape[--g->ntape];
        tref gy = g->t[n.out].grad;
        g->t[n.out].grad = TNONE;
        t_release(g, gy);
        node_release(g, &n);
    }
}

void grad_accumulate(struct gen *g, tref x, tref gx)
{
    if (gx == TNONE)
        return;
    if (x == TNONE || !g->t[x].requires_grad) {
        t_release(g, gx);
        return;
    }
    if (!g->grad_sum_tag)
        g->grad_sum_tag = gen_intern(g, "autograd.grad_sum");
    const char *tag = g->grad_sum_tag;
    if (g->t[gx].dtype != g->t[x].dtype) { /* the engine casts a gradient to its input's dtype */
        tref c = t_like(g, gx, (enum dtype)g->t[x].dtype, CAT_TEMP, tag);
        kern_cast(g, gx, c, tag);
        t_release(g, gx);
        gx = c;
    }
    struct tensor *t = &g->t[x];
    if (t->grad == TNONE) {
        t->grad = gx;
        return;
    }
    /* The engine's InputBuffer::accumulate sums in place only when it holds the last reference to the
     * buffered gradient (input_buffer.cpp, can_accumulate_inplace); in the streams recorded from torch
     * 2.15 (and on the CPU: aten.add.Tensor, not add_) every sum of two dense gradients is out of place. */
    tref cur = t->grad;
    tref sum = t_like(g, cur, (enum dtype)g->t[cur].dtype, CAT_TEMP, tag);
    kern_add(g, cur, gx, sum, 1.0f, 1.0f, tag);
    t_release(g, cur);
    t_release(g, gx);
    g->t[x].grad = sum;
}

tref pgrad_begin(struct gen *g, int32_t p, enum dtype computed)
{
    struct param *pp = &g->params[p];
    enum dtype gd = (enum dtype)g->t[pp->data].dtype;
    if (pp->grad == TNONE && computed == gd) {
        pp->grad = t_new2(g, pp->dims[0], pp->dims[1], gd, CAT_GRAD, pp->tag);
        return pp->grad;
    }
    return t_new2(g, pp->dims[0], pp->dims[1], computed, CAT_TEMP, pp->tag);
}

static void pgrad_accumulate(struct gen *g, int32_t p, tref dst)
{
    struct param *pp = &g->params[p];
    if (dst == pp->grad)
        return;
    enum dtype gd = (enum dtype)g->t[pp->data].dtype;
    if (pp->grad == TNONE) { /* computed in another dtype (autocast): the cast becomes .grad */
        pp->grad = t_new2(g, pp->dims[0], pp->dims[1], gd, CAT_GRAD, pp->tag);
        kern_cast(g, dst, pp->grad, pp->module);
    } else {
        tref src = dst;
        if (g->t[dst].dtype != gd) { /* cast to the parameter's dtype, then accumulated */
            src = t_like(g, dst, gd, CAT_TEMP, pp->tag);
            kern_cast(g, dst, src, pp->module);
        }
        kern_add(g, pp->grad, src, pp->grad, 1.0f, 1.0f, pp->module);
        if (src != dst)
            t_release(g, src);
    }
    t_release(g, dst);
}

void pgrad_end(struct gen *g, int32_t p, tref dst)
{
    pgrad_accumulate(g, p, dst);
    parallel_grad_ready(g, p); /* the gradient hook of ZeRO (parallel.c) */
}

static int run_backward(struct gen *g, int32_t base);

static void checkpoint_backward(struct gen *g, const struct node *n, tref gy)
{
    int32_t base = g->ntape, cursor = g->cursor;
    bool grad = g->grad_enabled, autocast = g->autocast;
    g->grad_enabled = true;
    g->autocast = n->ck.autocast;
    g->recomputing = true;
    g->cursor = n->ck.cursor;
    char scope[sizeof g->scope];
    int scope_len = g->scope_len, depth = g->scope_depth;
    memcpy(scope, g->scope, sizeof scope);
    snprintf(g->scope, sizeof g->scope, "%s", n->ck.scope ? n->ck.scope : "");
    g->scope_len = (int)strlen(g->scope);
    g->scope_depth = 0;
    g->scope_tag = NULL;
    tref out = n->ck.fn(g, &n->ck, n->saved[0]);
    if (g->autocast)
        nn_end_autocast(g);
    g->autocast = autocast;
    memcpy(g->scope, scope, sizeof scope);
    g->scope_len = scope_len;
    g->scope_depth = depth;
    g->scope_tag = NULL;
    g->cursor = cursor;
    g->recomputing = false;
    g->grad_enabled = grad;
    if (out == TNONE || g->failed)
        return;
    if (g->t[out].requires_grad && g->t[out].grad == TNONE)
        g->t[out].grad = t_ref(g, gy);
    g->t[out].holds++; /* keep its identity until the recomputed nodes are done */
    t_release(g, out);
    run_backward(g, base);
    g->t[out].holds--;
    if (g->t[out].holds == 0) {
        g->t[out].holds = 1;
        t_unhold(g, out);
    }
}

static int run_backward(struct gen *g, int32_t base)
{
    while (g->ntape > base && !g->failed) {
        struct node n = g->tape[--g->ntape];
        tref gy = g->t[n.out].grad;
        g->t[n.out].grad = TNONE;
        if (gy != TNONE) {
            if (n.kind == N_CKPT) {
                checkpoint_backward(g, &n, gy);
            } else {
                for (int k = 0; g->par && k < 2; k++) /* FSDP/ZeRO-3: the unit gathered for its backward */
                    if (n.param[k] >= 0)
                        parallel_param_use(g, n.param[k]);
                nn_backward(g, &n, &gy);
            }
            t_release(g, gy);
        }
        node_release(g, &n);
    }
    return g->failed ? -1 : 0;
}

int backward(struct gen *g, tref loss, int32_t base)
{
    if (!g->t[loss].requires_grad) {
        tape_drop(g, base);
        return 0;
    }
    tref one = t_like(g, loss, (enum dtype)g->t[loss].dtype, CAT_TEMP, gen_intern(g, "loss.grad"));
    kern_fill(g, one, 1.0f, gen_intern(g, "loss.grad"));
    g->t[loss].grad = one;
    return run_backward(g, base);
}

int backward_from(struct gen *g, tref out, tref gy, int32_t base)
{
    grad_accumulate(g, out, gy);
    return run_backward(g, base);
}
