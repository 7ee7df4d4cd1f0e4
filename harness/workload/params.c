/* params.c: parameter registration (GEN_PARAMS) and handing them back while the forward runs
 * (GEN_RUN), so one model description serves both. Parameters are registered in the order a module
 * defines them (what .parameters(), and so the load, the order of .grad and the optimizer's state
 * follow), which may differ from the order its forward uses them (Llama's norms come after its
 * attention and MLP): the forward takes each by its tag, the cursor making the common in-order case
 * a comparison. */
#include "workload/gen.h"
#include "util/map_array.h"
#include "util/hash.h"

#include <stdlib.h>
#include <string.h>

struct param_entry {
    const char *tag; /* interned: the pointer is the key */
    int32_t index;
    UT_hash_handle hh;
};

int32_t param_add(struct gen *g, const char *leaf, int64_t rows, int64_t cols)
{
    if ((size_t)g->nparams == g->cap_params &&
        map_array_grow((void **)&g->params, &g->cap_params, (size_t)g->nparams + 1, sizeof *g->params) < 0) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory for parameters");
        g->failed = 1;
        return -1;
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
    for (int i = 0; i < 5; i++)
        p->qstate[i] = TNONE;
    return g->nparams++;
}

int32_t param_add_buffer(struct gen *g, const char *leaf, int64_t rows, int64_t cols)
{
    int32_t p = param_add(g, leaf, rows, cols);
    if (p >= 0)
        g->params[p].buffer = true;
    return p;
}

static int index_params(struct gen *g)
{
    for (int32_t i = 0; i < g->nparams; i++) {
        struct param_entry *e = malloc(sizeof *e);
        if (!e)
            return -1;
        e->tag = g->params[i].tag;
        e->index = i;
        HASH_ADD_PTR(g->param_index, tag, e);
        if (!HASH_ADDED(e)) {
            free(e);
            return -1;
        }
    }
    return 0;
}

static int32_t param_find(struct gen *g, const char *leaf)
{
    if (g->cursor < g->nparams && gen_tag_is(g, g->params[g->cursor].tag, leaf))
        return g->cursor++;
    const char *tag = gen_tag(g, leaf);
    struct param_entry *e = NULL;
    if (!g->param_index && index_params(g) < 0) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory indexing parameters");
        g->failed = 1;
        return 0;
    }
    HASH_FIND_PTR(g->param_index, &tag, e);
    if (!e) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: the forward uses parameter %s, which the model did not register",
                    tag);
        g->failed = 1;
        return 0;
    }
    g->cursor = e->index + 1;
    return e->index;
}

int32_t param_take(struct gen *g, const char *leaf)
{
    int32_t p = param_find(g, leaf);
    if (g->on_take && !g->failed)
        g->on_take(g, p, g->on_take_ctx);
    return p;
}

void param_index_free(struct gen *g)
{
    struct param_entry *e, *tmp;
    HASH_ITER(hh, g->param_index, e, tmp) {
        HASH_DEL(g->param_index, e);
        free(e);
    }
}

bool param_trains(const struct gen *g, int32_t p)
{
    return p >= 0 && g->params[p].trainable;
}
