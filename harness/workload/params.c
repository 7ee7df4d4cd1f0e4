/* params.c: parameter registration (GEN_PARAMS) and the cursor that hands them back in the same
 * order while the forward runs (GEN_RUN), so one model description serves both. */
#include "workload/gen.h"

#include <stdlib.h>
#include <string.h>

int32_t param_add(struct gen *g, const char *leaf, int64_t rows, int64_t cols)
{
    if (g->nparams == g->cap_params) {
        int32_t cap = g->cap_params ? g->cap_params * 2 : 256;
        struct param *np = realloc(g->params, (size_t)cap * sizeof *np);
        if (!np) {
            if (!g->failed)
                err_set(g->e, ERR_INTERNAL, "workload: out of host memory for parameters");
            g->failed = 1;
            return -1;
        }
        g->params = np;
        g->cap_params = cap;
    }
    struct param *p = &g->params[g->nparams];
    memset(p, 0, sizeof *p);
    p->module = gen_tag(g, NULL);
    p->tag = gen_tag(g, leaf);
    p->dims[0] = rows;
    p->dims[1] = cols;
    p->numel = rows * cols;
    p->head = g->in_head;
    p->module_id = g->module_id;
    p->data = p->grad = p->master = p->ema = p->cast = p->stale = TNONE;
    for (int i = 0; i < 4; i++)
        p->state[i] = TNONE;
    return g->nparams++;
}

int32_t param_next(struct gen *g)
{
    if (g->cursor >= g->nparams) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: model walked past its %d parameters", g->nparams);
        g->failed = 1;
        return 0;
    }
    return g->cursor++;
}

int32_t param_peek(const struct gen *g)
{
    return g->mode == GEN_PARAMS ? g->nparams : g->cursor;
}

bool param_trains(const struct gen *g, int32_t p)
{
    return p >= 0 && g->params[p].trainable;
}
