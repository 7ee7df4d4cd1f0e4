/* robust.c: an OOM-robust training script (see robust.h). A registry follows every live tensor of the
 * device's run and whether it was made by the setup (before the first step: the model and its buffers).
 * After an OOM, the runner frees all but the model, the optimizer state, the EMA, the cuBLAS workspace
 * and (set_to_none false) the gradients. The retry's program then passes through a filter: its setup is
 * not run again (the tensors live at its end are paired, in order, with the first attempt's), a tensor
 * it creates of a kept kind (an optimizer state of the same size and module) is taken to be the kept
 * one, and every other tensor takes the next id after those in use (so ids stay numbered in the order
 * they first appear, as in any op program). */
#include "run/robust.h"

#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/vec.h"
#include "workload/generate.h"

struct kept {
    uint64_t id, bytes;
    const char *tag;
    uint8_t category;
    bool setup;     /* made before the first step of the device's first attempt */
    bool claimable; /* survived a recovery: a retry's tensor of its kind may be taken to be it */
    UT_hash_handle hh;
};

struct id_map {
    uint64_t from, to;
    UT_hash_handle hh;
};

struct pending { /* a retry's setup tensor, live so far */
    uint64_t id, bytes;
};

struct robust_run {
    struct op_sink sink; /* first: the retry filter */
    struct run_observer obs;
    struct job_spec job;
    struct runner *run;
    struct kept *kept;
    struct id_map *map;
    struct pending *setup;
    size_t nsetup, setup_cap;
    bool seen_step;       /* the device's first attempt has begun its first step */
    bool replaying_setup; /* the retry's program is still in its setup */
    uint64_t last_id;     /* the largest id the runner has been given */
};

static struct kept *find_kept(const struct robust_run *rr, uint64_t id)
{
    struct kept *k;
    HASH_FIND(hh, rr->kept, &id, sizeof id, k);
    return k;
}

/* Forgets a retry's id mapping (each retry pairs its tensors afresh). */
static void clear_map(struct robust_run *rr)
{
    struct id_map *m, *mn;
    HASH_ITER(hh, rr->map, m, mn) {
        HASH_DEL(rr->map, m);
        free(m);
    }
}

static void clear(struct robust_run *rr)
{
    struct kept *k, *kn;
    HASH_ITER(hh, rr->kept, k, kn) {
        HASH_DEL(rr->kept, k);
        free(k);
    }
    clear_map(rr);
    rr->nsetup = 0;
}

/* The registry follows what the runner executed. */
static int observe(struct run_observer *o, struct runner *r, const struct op *op, const struct alloc_block *block,
                   struct err *e)
{
    struct robust_run *rr = (struct robust_run *)((char *)o - offsetof(struct robust_run, obs));
    if (op->kind == OP_STEP)
        rr->seen_step = true;
    if (op->kind == OP_ALLOC && op->id > rr->last_id)
        rr->last_id = op->id;
    if (op->kind == OP_FREE) {
        struct kept *k = find_kept(rr, op->id);
        if (k) {
            HASH_DEL(rr->kept, k);
            free(k);
        }
    }
    if (op->kind != OP_ALLOC || runner_stopped_by_oom(r))
        return 0;
    struct kept *k = calloc(1, sizeof *k);
    if (!k)
        return err_set(e, ERR_INTERNAL, "out of host memory following tensors for job.robust");
    *k = (struct kept){.id = op->id, .bytes = op->bytes, .tag = op->name, .category = op->category,
                       .setup = !rr->seen_step};
    HASH_ADD(hh, rr->kept, id, sizeof k->id, k);
    if (!HASH_ADDED(k)) {
        free(k);
        return err_set(e, ERR_INTERNAL, "out of host memory following tensors for job.robust");
    }
    return 0;
}

/* Kinds of tensor the training script keeps across a retry, apart from the setup's. */
static bool kept_kind(const struct robust_run *rr, uint8_t category)
{
    return category == CAT_OPTIMIZER_STATE || category == CAT_EMA || category == CAT_WORKSPACE ||
           (category == CAT_GRAD && !rr->job.set_to_none);
}

static bool keep(void *user, uint64_t id, uint8_t category)
{
    struct robust_run *rr = user;
    const struct kept *k = find_kept(rr, id);
    return k && (k->setup || kept_kind(rr, category));
}

static int map_add(struct robust_run *rr, uint64_t from, uint64_t to, struct err *e)
{
    struct id_map *m = malloc(sizeof *m);
    if (!m)
        return err_set(e, ERR_INTERNAL, "out of host memory mapping a retry's tensors");
    m->from = from;
    m->to = to;
    HASH_ADD(hh, rr->map, from, sizeof m->from, m);
    if (!HASH_ADDED(m)) {
        free(m);
        return err_set(e, ERR_INTERNAL, "out of host memory mapping a retry's tensors");
    }
    return 0;
}

static uint64_t translate(const struct robust_run *rr, uint64_t id)
{
    struct id_map *m;
    HASH_FIND(hh, rr->map, &id, sizeof id, m);
    return m ? m->to : id; /* not the retry's: the runner says so */
}

/* The retry's setup ends: the tensors it left live are the first attempt's, in the same order. */
static int pair_setup(struct robust_run *rr, struct err *e)
{
    size_t i = 0;
    for (struct kept *k = rr->kept; k; k = k->hh.next) {
        if (!k->setup)
            continue;
        if (i == rr->nsetup || rr->setup[i].bytes != k->bytes)
            return err_set(e, ERR_INTERNAL,
                           "job.robust: the retried job's setup differs from the first attempt's at its tensor %zu "
                           "(%s)",
                           i + 1, k->tag ? k->tag : "-");
        if (map_add(rr, rr->setup[i++].id, k->id, e))
            return -1;
    }
    if (i != rr->nsetup)
        return err_set(e, ERR_INTERNAL, "job.robust: the retried job's setup leaves %zu tensors, the first attempt's %zu",
                       rr->nsetup, i);
    return 0;
}

/* A kept tensor the retry's new one is taken to be: same kind, size and module, in the order made. */
static struct kept *claim(struct robust_run *rr, const struct op *op)
{
    if (!kept_kind(rr, op->category))
        return NULL;
    for (struct kept *k = rr->kept; k; k = k->hh.next)
        if (k->claimable && k->category == op->category && k->bytes == op->bytes &&
            (k->tag == op->name || (k->tag && op->name && !strcmp(k->tag, op->name)))) {
            k->claimable = false;
            return k;
        }
    return NULL;
}

static int setup_op(struct robust_run *rr, const struct op *op, struct err *e)
{
    if (op->kind == OP_ALLOC) {
        if (vec_grow((void **)&rr->setup, &rr->setup_cap, rr->nsetup + 1, sizeof *rr->setup))
            return err_set(e, ERR_INTERNAL, "out of host memory replaying a retry's setup");
        rr->setup[rr->nsetup++] = (struct pending){op->id, op->bytes};
    } else if (op->kind == OP_FREE) {
        for (size_t i = 0; i < rr->nsetup; i++)
            if (rr->setup[i].id == op->id) {
                memmove(&rr->setup[i], &rr->setup[i + 1], (rr->nsetup - i - 1) * sizeof *rr->setup);
                rr->nsetup--;
                break;
            }
    }
    return 0;
}

static int filter_emit(struct op_sink *sink, const struct op *op, struct err *e)
{
    struct robust_run *rr = (struct robust_run *)sink;
    struct op_sink *next = runner_sink(rr->run);
    if (rr->replaying_setup) {
        if (op->kind != OP_STEP)
            return setup_op(rr, op, e); /* the model is already there: none of the setup runs again */
        if (pair_setup(rr, e))
            return -1;
        rr->replaying_setup = false;
    }
    struct op t = *op;
    if (op->kind == OP_ALLOC) {
        const struct kept *k = claim(rr, op);
        if (k)
            return map_add(rr, op->id, k->id, e);
        t.id = rr->last_id + 1;
        if (map_add(rr, op->id, t.id, e))
            return -1;
    } else if (op->kind == OP_FREE) {
        t.id = translate(rr, op->id);
    } else if (op->kind == OP_KERNEL) {
        for (unsigned i = 0; i < t.kernel.ntensors; i++)
            if (t.kernel.tensors[i])
                t.kernel.tensors[i] = translate(rr, t.kernel.tensors[i]);
    }
    return next->emit(next, &t, e);
}

struct robust_run *robust_create(const struct job_spec *job)
{
    struct robust_run *rr = calloc(1, sizeof *rr);
    if (!rr)
        return NULL;
    rr->sink.emit = filter_emit;
    rr->obs.on_op = observe;
    rr->job = *job;
    return rr;
}

void robust_destroy(struct robust_run *rr)
{
    if (!rr)
        return;
    clear(rr);
    free(rr->setup);
    free(rr);
}

int robust_attach(struct robust_run *rr, struct runner *run)
{
    clear(rr);
    rr->run = run;
    rr->seen_step = false;
    rr->last_id = 0;
    return runner_add_observer(run, &rr->obs);
}

static uint64_t live_bytes(struct runner *run)
{
    const uint64_t *c = runner_category_live(run);
    uint64_t sum = 0;
    for (int i = 0; i < CAT_COUNT; i++)
        sum += c[i];
    return sum;
}

/* After an OOM: free what the failed attempt held, empty the cache, and let the kept tensors be claimed. */
static int recover(struct robust_run *rr, struct robust_attempt *a, struct err *e)
{
    uint64_t before = live_bytes(rr->run);
    struct op empty = {.kind = OP_EMPTY_CACHE};
    struct op_sink *next = runner_sink(rr->run);
    if (runner_recover(rr->run, keep, rr, e) || next->emit(next, &empty, e))
        return -1;
    a->freed = before - live_bytes(rr->run);
    a->reserved_after = (uint64_t)allocator_stats(runner_allocator(rr->run))->reserved_bytes[STAT_ALL].current;
    for (struct kept *k = rr->kept; k; k = k->hh.next)
        k->claimable = !k->setup;
    clear_map(rr);
    return 0;
}

int robust_generate(struct robust_run *rr, const char *device, struct robust_result *out, struct err *e)
{
    const struct robust_spec *p = &rr->job.robust;
    int batch = rr->job.batch, accum = rr->job.grad_accum;
    out->on = true;
    for (int retries = 0;; retries++) {
        if (out->nattempts == ROBUST_MAX_ATTEMPTS)
            return err_set(e, ERR_INTERNAL, "job.robust: more than %d attempts", ROBUST_MAX_ATTEMPTS);
        struct robust_attempt *a = &out->attempts[out->nattempts++];
        *a = (struct robust_attempt){.batch = batch, .grad_accum = accum};
        snprintf(a->device, sizeof a->device, "%s", device);
        struct job_spec job = rr->job;
        job.batch = batch;
        job.grad_accum = accum;
        rr->replaying_setup = retries > 0;
        rr->nsetup = 0;
        double t0 = runner_kernel_seconds(rr->run);
        struct err ge = {0};
        int rc = workload_generate(&job, retries ? &rr->sink : runner_sink(rr->run), &ge);
        runner_flush_times(rr->run);
        const struct run_result *now = runner_peek(rr->run);
        out->measured = now->measured;
        a->seconds = runner_kernel_seconds(rr->run) - t0;
        a->samples = now->samples;
        if (rc == 0) {
            a->steps_done = now->steps;
            out->settled = true;
            out->batch = batch;
            out->grad_accum = accum;
            return 0;
        }
        if (!runner_stopped_by_oom(rr->run)) {
            *e = ge;
            return -1;
        }
        a->oom = true;
        a->step = now->oom.step;
        a->steps_done = now->oom.step > 0 ? now->oom.step - 1 : 0;
        snprintf(a->phase, sizeof a->phase, "%s", now->oom.phase);
        snprintf(a->tag, sizeof a->tag, "%s", now->oom.tag);
        if (p->on_oom != ON_OOM_HALVE_BATCH || retries == p->max_retries || batch / 2 < p->min_batch_size)
            return 1;
        if (recover(rr, a, e))
            return -1;
        batch /= 2;
        if (p->keep_effective_batch)
            accum *= 2;
    }
}
