/* soak.c: kind soak: a scenario's variant for many steps (its job.steps replaced), watched at every
 * step boundary: the allocator's invariants must hold at each, and after the warm-up steps reserved and
 * allocated at each step's end must equal the first such step's (a steady state: nothing grows). */
#include <stdio.h>

#include "stress/stress_kind.h"
#include "workload/generate.h"

struct soak_watch {
    struct run_observer base;
    struct stress_ctx *c;
    bool have_steady, moved, inv_ok;
    char moved_why[256], inv_why[256];
};

static void step_end(struct soak_watch *w, struct runner *run, int64_t step)
{
    if (step < 1)
        return;
    struct stress_result *r = w->c->res;
    const struct allocator *a = runner_allocator(run);
    const struct alloc_stats *s = allocator_stats(a);
    uint64_t allocated = (uint64_t)s->allocated_bytes[STAT_ALL].current;
    uint64_t reserved = (uint64_t)s->reserved_bytes[STAT_ALL].current;
    r->steps_run = step;
    r->invariant_checks++;
    char why[200];
    if (w->inv_ok && !stress_invariants(a, why, sizeof why)) {
        w->inv_ok = false;
        snprintf(w->inv_why, sizeof w->inv_why, "step %lld: %s", (long long)step, why);
    }
    if (r->npoints < STRESS_MAX_POINTS) {
        struct stress_point pt = stress_point_now(w->c);
        pt.op = (uint64_t)step;
        r->points[r->npoints++] = pt;
    }
    if (step <= w->c->p->soak.warmup)
        return;
    if (!w->have_steady) {
        w->have_steady = true;
        r->steady_allocated = allocated;
        r->steady_reserved = reserved;
    } else if (!w->moved && (allocated != r->steady_allocated || reserved != r->steady_reserved)) {
        w->moved = true;
        snprintf(w->moved_why, sizeof w->moved_why,
                 "step %lld ends with %llu allocated, %llu reserved; step %d ended with %llu, %llu", (long long)step,
                 (unsigned long long)allocated, (unsigned long long)reserved, w->c->p->soak.warmup + 1,
                 (unsigned long long)r->steady_allocated, (unsigned long long)r->steady_reserved);
    }
    r->allocated_growth = (int64_t)(allocated - r->steady_allocated);
    r->reserved_growth = (int64_t)(reserved - r->steady_reserved);
}

/* OP_STEP n begins step n: the allocator is as step n - 1 left it. */
static int on_op(struct run_observer *o, struct runner *run, const struct op *op, const struct alloc_block *b,
                 struct err *e)
{
    (void)b, (void)e;
    if (op->kind == OP_STEP)
        step_end((struct soak_watch *)o, run, (int64_t)op->id - 1);
    return 0;
}

int stress_soak(struct stress_ctx *c, struct err *e)
{
    struct stress_result *r = c->res;
    struct soak_watch w = {.base.on_op = on_op, .c = c, .inv_ok = true};
    if (runner_add_observer(c->run, &w.base))
        return err_set(e, ERR_INTERNAL, "too many run observers");
    struct err gen = {0};
    int rc = workload_generate(c->job, runner_sink(c->run), &gen);
    bool oom = rc && runner_stopped_by_oom(c->run);
    if (rc && !oom) {
        *e = gen;
        return err_prefix(e, "%s: soak of %s: ", c->p->path, c->p->soak.scenario);
    }
    if (!oom)
        step_end(&w, c->run, c->job->steps);
    stress_check(r, "every step ran without an OOM", !oom, "%lld of %d steps%s", (long long)r->steps_run,
                 c->job->steps, oom ? ": the variant does not fit; soak one that does" : "");
    stress_check(r, "allocator invariants at every step", w.inv_ok, "%s",
                 w.inv_ok ? "hold" : w.inv_why);
    bool steady = w.have_steady && !w.moved;
    stress_check(r, "steady state after the warm-up", steady, "%s",
                 w.moved          ? w.moved_why
                 : w.have_steady ? "reserved and allocated equal at every step end"
                                 : "no step after the warm-up: more steps");
    return 0;
}
