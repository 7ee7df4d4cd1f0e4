/* runner.c: the op-program executor (see runner.h). */
#include "run/runner.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernel_shape.h"
#include "kernels.h"
#include "util/bump.h"
#include "util/hash.h"
#include "util/open_index.h"
#include "util/prefault.h"
#include "util/vec.h"

/* An OP_MANAGED_ALLOC's pages on the device (rare: kept beside its live tensor, which stays small). */
struct managed_pages {
    uint64_t addr, bytes;
};

struct live_tensor { /* 48 bytes: thousands are live at once */
    uint64_t id;
    union {
        struct alloc_block *block;      /* !managed: its block (NULL: zero bytes) */
        struct managed_pages *pages;    /* managed: its pages on the device (NULL: on the host) */
    };
    const char *tag; /* the ALLOC op's name (a module tag, a recorded site), or a restored block's */
    void *note; /* the on_tensor observer's word for it */
    union {
        uint64_t seq;                   /* live: its place in allocation order, as recovery and lending go */
        struct live_tensor *next_spare; /* recycled */
    };
    uint8_t category;
    bool managed; /* an OP_MANAGED_ALLOC's */
};

/* A live tensor's block: NULL for a zero-byte or a managed allocation. */
static inline struct alloc_block *block_of(const struct live_tensor *t)
{
    return t->managed ? NULL : t->block;
}

struct failed_id {
    uint64_t id;
    UT_hash_handle hh;
};

struct lent_workspace { /* a library workspace handed to the device */
    uint64_t addr;
    struct alloc_block *own; /* allocated for the library (freed with it), or NULL if the program's */
};

#define RUN_MAX_OBSERVERS 6

/* An observer's hook with its observer, kept packed so emit walks only the hooks there are. */
struct before_hook {
    void (*fn)(struct run_observer *o, const struct op *op);
    struct run_observer *o;
};
struct after_hook {
    int (*fn)(struct run_observer *o, struct runner *r, const struct op *op, const struct alloc_block *block,
              struct err *e);
    struct run_observer *o;
};

_Static_assert(OP_KIND_COUNT < 32, "an observer's kinds and the runner's hooked kinds (one more: unknown) are bits of a uint32_t");

/* The hooks an op of one kind calls (the last row: an op of unknown kind), in the order added. */
struct kind_hooks {
    struct before_hook before[RUN_MAX_OBSERVERS]; /* the before_op hooks */
    struct after_hook after[RUN_MAX_OBSERVERS];   /* and the on_op hooks */
    size_t nbefore, nafter;
};

struct runner {
    struct op_sink sink; /* first: the sink pointer is the runner */
    struct runner_options opt;
    struct run_observer *observers[RUN_MAX_OBSERVERS];
    size_t nobservers;
    struct kind_hooks hooks[OP_KIND_COUNT + 1];
    uint32_t hooked; /* bit k: an op of kind k has hooks (bit OP_KIND_COUNT: one of unknown kind) */
    struct run_observer *tensor_obs; /* the observer with on_tensor, or NULL */
    bool launches, runs_kernels, async_kernels; /* the device's: it has launch, DEVICE_RUNS_KERNELS, DEVICE_ASYNC_KERNELS */
    struct kernel_cost_memo costs; /* kernels' costs by their calls' shapes */
    struct failed_id *failed; /* ids whose allocation OOMed (continue_after_oom): their frees are expected */
    bool stopped;             /* an op failed (an OOM that ends the run, or an error): later ops are refused */
    bool ended_by_oom;
    bool recorded_release, recorded_fresh; /* a recorded release, then new memory, since the last alloc/free */
    struct lent_workspace lent[64];
    size_t nlent;
    uint64_t phase_used_start;
    struct device_workspace ws; /* the device's library workspaces come from here */
    struct device *dev;
    struct allocator *a;
    struct open_index live;    /* the live tensors by open_index_hash_u64(id) */
    uint64_t next_seq; /* the next live tensor's seq */
    struct live_tensor *spare; /* recycled entries */
    struct bump live_mem;      /* where live entries come from: freed with the runner */
    uint64_t category_live[CAT_COUNT];
    uint64_t managed_current; /* resident bytes of OP_MANAGED_ALLOC tensors */
    struct run_result res;
    struct phase_peak *phase; /* the current phase's in res.phases (NULL before the first) */
    char phase_name[32];
    size_t early_points; /* points of steps 0 to 2, kept; later ones are the last step's */
    int64_t phase_step;  /* the step the current phase began in */
    bool phase_trains; /* phase_is_training(phase_name) */
    struct timespec started, wall_mark; /* measuring devices: the run's start; the last time taken */
    double step_train, step_wall; /* training kernel and wall-clock time of the current step so far */
    double *step_times, *step_walls; /* of each completed step */
    size_t nstep_times, step_times_cap, step_walls_cap;
};

bool phase_is_training(const char *name)
{
    static const char *const training[] = {"forward", "backward", "optimizer", "zero_grad", "ema"};
    for (size_t i = 0; i < sizeof training / sizeof training[0]; i++)
        if (!strcmp(name, training[i]))
            return true;
    return false;
}

bool phase_is_eval(const char *name)
{
    return !strncmp(name, "eval", 4) || !strcmp(name, "decode") || !strcmp(name, "encode_prompt") ||
           !strcmp(name, "denoise"); /* job.kind diffusion's phases are sampling and decode too */
}

static uint64_t device_used(struct runner *r)
{
    uint64_t free_bytes = 0, total = 0;
    r->dev->ops->mem_info(r->dev, &free_bytes, &total);
    return total - free_bytes;
}

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

/* The device's kernel time since the last reading goes to the current phase, the current step (in a
 * training phase) and the run. */
static void take_kernel_time(struct runner *r)
{
    if (!r->dev->ops->kernel_seconds)
        return;
    double t = r->dev->ops->kernel_seconds(r->dev);
    r->res.kernel_seconds += t;
    if (r->phase)
        r->phase->seconds += t;
    if (r->phase_trains)
        r->step_train += t;
}

/* At a phase or step boundary: the kernel time (on an asynchronous device, once its kernels end) and,
 * on a measuring device, the wall-clock time since the last boundary, the step's if the phase trains. */
static void take_times(struct runner *r)
{
    take_kernel_time(r);
    if (!r->res.measured)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (r->phase_trains)
        r->step_wall += seconds_between(&r->wall_mark, &now);
    r->wall_mark = now;
}

/* The point at the end of the current phase: its allocated, reserved and category bytes. */
static void end_point(struct runner *r)
{
    if (!strcmp(r->phase_name, "start"))
        return;
    struct run_result *res = &r->res;
    /* after step 2, the last step only: a new step replaces the previous one's points */
    int64_t step = r->phase_step;
    if (step > 2 && res->npoints > r->early_points && res->points[r->early_points].step != step)
        res->npoints = r->early_points;
    if (res->npoints == RUN_MAX_POINTS)
        return;
    const struct alloc_stats *s = allocator_stats(r->a);
    struct run_point *p = &res->points[res->npoints++];
    *p = (struct run_point){.step = step, .allocated = (uint64_t)s->allocated_bytes[STAT_ALL].current,
                            .reserved = (uint64_t)s->reserved_bytes[STAT_ALL].current};
    snprintf(p->phase, sizeof p->phase, "%s", r->phase_name);
    memcpy(p->category, r->category_live, sizeof p->category);
    if (step <= 2)
        r->early_points = res->npoints;
}

static void enter_phase(struct runner *r, const char *name)
{
    take_times(r);
    uint64_t used = device_used(r);
    struct phase_peak *prev = r->phase;
    if (prev && !prev->delta_recorded) {
        prev->device_used_delta = (int64_t)used - (int64_t)r->phase_used_start;
        prev->delta_recorded = true;
    }
    r->phase_used_start = used;
    end_point(r);
    snprintf(r->phase_name, sizeof r->phase_name, "%s", name ? name : "?");
    r->phase_step = r->res.steps;
    name = r->phase_name;
    r->phase_trains = phase_is_training(name);
    for (size_t i = 0; i < r->res.nphases; i++) {
        if (!strcmp(r->res.phases[i].name, name)) {
            r->phase = &r->res.phases[i];
            return;
        }
    }
    if (r->res.nphases == RUN_MAX_PHASES) {
        r->phase = &r->res.phases[RUN_MAX_PHASES - 1]; /* more phases than columns: the last collects the rest */
        return;
    }
    r->phase = &r->res.phases[r->res.nphases++];
    *r->phase = (struct phase_peak){0};
    snprintf(r->phase->name, sizeof r->phase->name, "%s", name);
}

_Static_assert(sizeof((struct run_result *)0)->peak_allocated_phase == sizeof((struct runner *)0)->phase_name &&
                   sizeof((struct run_result *)0)->peak_reserved_phase == sizeof((struct runner *)0)->phase_name,
               "track_peaks copies the phase name whole");

/* track_peaks' slow path: a new peak of the run or the phase. */
static __attribute__((noinline)) void new_peaks(struct runner *r, uint64_t allocated, uint64_t reserved)
{
    struct phase_peak *p = r->phase;
    if (allocated > r->res.peak_allocated) {
        r->res.peak_allocated = allocated;
        r->res.peak_allocated_step = r->res.steps;
        memcpy(r->res.peak_allocated_phase, r->phase_name, sizeof r->phase_name); /* a copy per new peak: no printf */
        memcpy(r->res.category_at_peak, r->category_live, sizeof r->category_live);
    }
    if (reserved > r->res.peak_reserved) {
        r->res.peak_reserved = reserved;
        r->res.peak_reserved_step = r->res.steps;
        memcpy(r->res.peak_reserved_phase, r->phase_name, sizeof r->phase_name);
        r->res.unallocated_at_peak = reserved - allocated;
    }
    if (p) {
        if (allocated > p->peak_allocated) {
            p->peak_allocated = allocated;
            p->peak_allocated_step = r->res.steps;
        }
        if (reserved > p->peak_reserved) {
            p->peak_reserved = reserved;
            p->peak_reserved_step = r->res.steps;
        }
    }
}
/* After an allocation: the run's and the current phase's peaks. */
static inline void track_peaks(struct runner *r)
{
    uint64_t allocated, reserved;
    allocator_current_bytes(r->a, &allocated, &reserved);
    /* the run's peaks are never below the current phase's: nothing to do under the phase's */
    const struct phase_peak *p = r->phase;
    if (!p || allocated > p->peak_allocated || reserved > p->peak_reserved)
        new_peaks(r, allocated, reserved);
}

void runner_warn(struct runner *r, const char *fmt, ...)
{
    if (r->res.nwarnings < RUN_MAX_WARNINGS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->res.warnings[r->res.nwarnings], sizeof r->res.warnings[0], fmt, ap);
        va_end(ap);
    }
    r->res.nwarnings++;
}

static struct live_tensor *find_live(const struct runner *r, uint64_t id)
{
    return open_index_get(&r->live, open_index_hash_u64(id));
}

/* The live table's slot for id (open_index_slot): the slot holding it, or the empty slot add_live puts it
 * in. -1 without host memory. */
static inline __attribute__((always_inline)) ptrdiff_t live_slot(struct runner *r, uint64_t id, struct err *e)
{
    ptrdiff_t at = open_index_slot(&r->live, open_index_hash_u64(id));
    return at < 0 ? err_set(e, ERR_INTERNAL, "out of host memory tracking tensors") : at;
}

static void record_oom(struct runner *r, const struct op *op, const struct alloc_oom *oom)
{
    struct run_oom o = {.happened = true, .where = op->where, .step = r->res.steps,
                        .category = (enum category)op->category, .bytes = op->bytes};
    snprintf(o.phase, sizeof o.phase, "%s", r->phase_name);
    snprintf(o.tag, sizeof o.tag, "%s", op->name ? op->name : "-");
    memcpy(o.category_live, r->category_live, sizeof o.category_live);
    alloc_oom_message(oom, r->opt.device_index, o.message, sizeof o.message);
    if (r->res.nooms++ < RUN_MAX_OOMS)
        r->res.ooms[r->res.nooms - 1] = o;
    if (!r->res.oom.happened) /* the first, or the first since runner_recover */
        r->res.oom = o;
}
/* An ALLOC's OOM, to the observers with on_oom. */
static void tell_oom(struct runner *r, const struct op *op)
{
    for (size_t i = 0; i < r->nobservers; i++)
        if (r->observers[i]->on_oom)
            r->observers[i]->on_oom(r->observers[i], op);
}

/* Remembers an id whose allocation failed, so its free is expected (continue_after_oom). */
static int remember_failed(struct runner *r, uint64_t id, struct err *e)
{
    struct failed_id *f;
    HASH_FIND(hh, r->failed, &id, sizeof id, f);
    if (f)
        return 0;
    if (!(f = malloc(sizeof *f)))
        return err_set(e, ERR_INTERNAL, "out of host memory tracking failed allocations");
    f->id = id;
    HASH_ADD(hh, r->failed, id, sizeof f->id, f);
    if (!HASH_ADDED(f)) {
        free(f);
        return err_set(e, ERR_INTERNAL, "out of host memory tracking failed allocations");
    }
    return 0;
}

/* Tells the on_tensor observer, if any, that t (with its block of `bytes`) became live or is leaving. */
static inline void tell_tensor(struct runner *r, struct live_tensor *t, uint64_t bytes, bool restored, bool live)
{
    struct run_observer *o = r->tensor_obs;
    if (o)
        o->on_tensor(o, &(struct run_tensor){t->id, bytes, t->tag, t->category, restored, r->opt.stable_names},
                     &t->note, live);
}

/* Releases the live tensor in slot at of the live table. */
static inline __attribute__((always_inline)) void release_tensor(struct runner *r, size_t at)
{
    struct live_tensor *t = r->live.slots[at].item;
    if (t->managed) {
        if (t->pages) {
            r->dev->ops->seg_free(r->dev, t->pages->addr, t->pages->bytes);
            r->managed_current -= t->pages->bytes;
            free(t->pages);
        }
    } else if (t->block) {
        uint64_t bytes = alloc_block_size(t->block);
        tell_tensor(r, t, bytes, false, false);
        r->category_live[t->category] -= bytes;
        allocator_free(r->a, t->block);
    }
    open_index_remove_at(&r->live, at);
    t->next_spare = r->spare;
    r->spare = t;
}

/* A new live tensor under id, put in slot at (live_slot's empty slot for id); block may be NULL (a
 * zero-byte allocation). restored: a block live at a recording's start. NULL without host memory. */
static inline struct live_tensor *add_live(struct runner *r, size_t at, uint64_t id, struct alloc_block *b,
                                           uint8_t category, const char *tag, bool restored, struct err *e)
{
    struct live_tensor *t = r->spare;
    if (t)
        r->spare = t->next_spare;
    else if (!(t = bump_alloc(&r->live_mem, sizeof *t))) {
        err_set(e, ERR_INTERNAL, "out of host memory tracking tensors");
        return NULL;
    }
    t->id = id;
    t->block = b;
    t->managed = false;
    t->tag = tag;
    t->category = category < CAT_COUNT ? category : CAT_OTHER;
    t->note = NULL;
    open_index_put(&r->live, at, open_index_hash_u64(id), t);
    t->seq = r->next_seq++;
    if (b) {
        uint64_t bytes = alloc_block_size(b);
        r->category_live[t->category] += bytes;
        tell_tensor(r, t, bytes, restored, true);
    }
    return t;
}

static inline __attribute__((always_inline)) int do_alloc(struct runner *r, const struct op *op, struct alloc_block **out, struct err *e)
{
    ptrdiff_t at = live_slot(r, op->id, e);
    if (at < 0)
        return -1;
    if (r->live.slots[at].item) {
        if (!r->opt.lenient_ids)
            return err_set(e, ERR_INTERNAL, "op program allocates tensor %llu, which is still live",
                           (unsigned long long)op->id);
        runner_warn(r, "%s %llu: address 0x%llx allocated again while live; the earlier block is freed",
                    r->opt.where_unit, (unsigned long long)op->where, (unsigned long long)op->id);
        release_tensor(r, (size_t)at);
        at = live_slot(r, op->id, e); /* the removal moved slots; room is left, so this cannot fail */
    }
    struct alloc_block *b = NULL;
    struct alloc_oom oom;
    bool fresh = r->recorded_fresh;
    r->recorded_release = r->recorded_fresh = false;
    int rc = (fresh ? allocator_malloc_fresh : allocator_malloc)(r->a, op->bytes, (uint64_t)op->stream, &b, &oom, e);
    if (rc < 0)
        return -1;
    r->res.allocs++;
    if (rc == 1) {
        record_oom(r, op, &oom);
        tell_oom(r, op);
        if (!r->opt.continue_after_oom) {
            r->ended_by_oom = true;
            return -1;
        }
        return remember_failed(r, op->id, e);
    }
    /* the allocator does not touch the live table: at is still the slot for op->id */
    if (!add_live(r, (size_t)at, op->id, b, op->category, op->name, false, e)) {
        allocator_free(r->a, b);
        return -1;
    }
    *out = b;
    track_peaks(r);
    return 0;
}

/* cudaMallocManaged (OP_MANAGED_ALLOC, bitsandbytes' paged optimizer state): memory from the device
 * beside the allocator's segments, never in its reserved bytes. Modelled resident: the pages take
 * device memory while the device has room; without room they stay on the host (unified memory
 * oversubscribes instead of failing), which a device that runs kernels cannot follow. */
static int do_managed_alloc(struct runner *r, const struct op *op, struct err *e)
{
    ptrdiff_t at = live_slot(r, op->id, e);
    if (at < 0)
        return -1;
    if (r->live.slots[at].item)
        return err_set(e, ERR_INTERNAL, "op program allocates tensor %llu, which is still live",
                       (unsigned long long)op->id);
    uint64_t addr = 0;
    enum dev_status st = op->bytes ? r->dev->ops->seg_alloc(r->dev, op->bytes, op->stream, &addr, e) : DEV_OK;
    if (st == DEV_ERROR)
        return -1;
    if (st == DEV_OOM && device_has(r->dev, DEVICE_RUNS_KERNELS))
        return err_set(e, ERR_INTERNAL,
                       "%s: %llu bytes of unified memory (paged state) do not fit on the device, and oomlab "
                       "cannot keep them on the host for a device that runs kernels",
                       op->name ? op->name : "-", (unsigned long long)op->bytes);
    bool resident = st == DEV_OK && op->bytes;
    struct managed_pages *pages = resident ? malloc(sizeof *pages) : NULL;
    struct live_tensor *t = resident && !pages ? NULL : add_live(r, (size_t)at, op->id, NULL, op->category, op->name, false, e);
    if (!t) {
        if (resident && !pages)
            err_set(e, ERR_INTERNAL, "out of host memory tracking tensors");
        if (resident)
            r->dev->ops->seg_free(r->dev, addr, op->bytes);
        free(pages);
        return -1;
    }
    t->managed = true;
    t->pages = pages;
    if (st == DEV_OOM) {
        r->res.managed_on_host += op->bytes;
        return 0;
    }
    if (!pages) /* zero bytes */
        return 0;
    *pages = (struct managed_pages){addr, op->bytes};
    r->managed_current += op->bytes;
    if (r->managed_current > r->res.managed_peak)
        r->res.managed_peak = r->managed_current;
    return 0;
}

static inline __attribute__((always_inline)) int do_free(struct runner *r, const struct op *op, struct err *e)
{
    r->recorded_release = r->recorded_fresh = false;
    ptrdiff_t at = open_index_first(&r->live, open_index_hash_u64(op->id));
    if (at >= 0) {
        release_tensor(r, (size_t)at);
        r->res.frees++;
        return 0;
    }
    struct failed_id *f;
    HASH_FIND(hh, r->failed, &op->id, sizeof op->id, f);
    if (f) { /* the script caught the OOM: there is nothing to free */
        HASH_DEL(r->failed, f);
        free(f);
        r->res.frees_of_unknown++;
        runner_warn(r, "%s %llu: free of an allocation that failed with an OOM; ignored", r->opt.where_unit,
                    (unsigned long long)op->where);
        return 0;
    }
    if (!r->opt.lenient_ids)
        return err_set(e, ERR_INTERNAL, "op program frees tensor %llu, which is not live", (unsigned long long)op->id);
    r->res.frees_of_unknown++;
    runner_warn(r, "%s %llu: free of 0x%llx, which is not allocated; ignored", r->opt.where_unit,
                (unsigned long long)op->where, (unsigned long long)op->id);
    return 0;
}

/* A request the recording OOMed on (OP_RECORDED_OOM): an OOM here too is the run's; a block it gets is
 * given back at once, with the segment allocated or the pages mapped for it, so the trace goes on from the
 * state it recorded. */
static int do_recorded_oom(struct runner *r, const struct op *op, struct err *e)
{
    const struct alloc_stats *st = allocator_stats(r->a);
    int64_t segments = st->num_device_alloc, reserved = st->reserved_bytes[STAT_ALL].current;
    struct alloc_block *b = NULL;
    struct alloc_oom oom;
    r->recorded_release = r->recorded_fresh = false;
    int rc = allocator_malloc(r->a, op->bytes, (uint64_t)op->stream, &b, &oom, e);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        record_oom(r, op, &oom);
        if (!r->opt.continue_after_oom) {
            r->ended_by_oom = true;
            return -1;
        }
        return 0;
    }
    track_peaks(r);
    uint64_t addr = alloc_block_addr(b), size = alloc_block_size(b);
    allocator_free(r->a, b);
    int64_t grown = st->reserved_bytes[STAT_ALL].current - reserved;
    if (st->num_device_alloc > segments && grown > 0 && !allocator_release_segment(r->a, addr))
        allocator_release_mapped(r->a, addr + size - (uint64_t)grown, (uint64_t)grown); /* expandable: the new pages */
    return 0;
}

static int do_record_stream(struct runner *r, const struct op *op, struct err *e)
{
    struct live_tensor *t = find_live(r, op->id);
    if (!t)
        return err_set(e, ERR_INTERNAL, "op program records a stream use of tensor %llu, which is not live",
                       (unsigned long long)op->id);
    allocator_record_stream(r->a, block_of(t), (uint64_t)op->stream);
    return 0;
}

/* Launches a kernel on a device that runs it, with the addresses of the live tensors it names. */
static __attribute__((noinline)) int launch_on_tensors(struct runner *r, const struct op *op, const struct kernel_cost *cost,
                                                       struct err *e)
{
    uint64_t addrs[KERNEL_MAX_TENSORS] = {0};
    for (unsigned i = 0; i < op->kernel.ntensors && i < KERNEL_MAX_TENSORS; i++) {
        struct live_tensor *t = find_live(r, op->kernel.tensors[i]);
        if (!t)
            return err_set(e, ERR_INTERNAL, "kernel %s names tensor %llu, which is not live",
                           kernel_get(op->kernel.kernel)->name,
                           (unsigned long long)op->kernel.tensors[i]);
        addrs[i] = t->managed ? (t->pages ? t->pages->addr : 0) : t->block ? alloc_block_addr(t->block) : 0;
    }
    return r->dev->ops->launch(r->dev, &op->kernel, cost, addrs, e);
}

static inline __attribute__((always_inline)) int do_kernel(struct runner *r, const struct op *op, struct err *e)
{
    if (op->kernel.kernel >= K_COUNT)
        return err_set(e, ERR_INTERNAL, "op program launches unknown kernel %u", op->kernel.kernel);
    const struct kernel_cost cost = kernel_cost_memo(&r->costs, &op->kernel);
    r->res.kernels++;
    r->res.flops += cost.flops;
    r->res.bytes_moved += cost.bytes;
    if (r->phase)
        r->phase->flops += cost.flops;
    if (!r->launches)
        return 0;
    int rc = r->runs_kernels ? launch_on_tensors(r, op, &cost, e)
                             : r->dev->ops->launch(r->dev, &op->kernel, &cost, NULL, e);
    if (!r->async_kernels) /* its time is known now: into this phase and step */
        take_kernel_time(r);
    return rc;
}

/* Closes the current step's training time (take_times first). */
static int end_step(struct runner *r, struct err *e)
{
    if (vec_grow((void **)&r->step_times, &r->step_times_cap, r->nstep_times + 1, sizeof *r->step_times) ||
        vec_grow((void **)&r->step_walls, &r->step_walls_cap, r->nstep_times + 1, sizeof *r->step_walls))
        return err_set(e, ERR_INTERNAL, "out of host memory timing step %lld", (long long)r->res.steps);
    r->step_walls[r->nstep_times] = r->step_wall;
    r->step_times[r->nstep_times++] = r->step_train;
    r->step_train = r->step_wall = 0;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median, min and max of n > 0 values (sorts them). */
static void median_min_max(double *v, size_t n, double *median, double *min, double *max)
{
    qsort(v, n, sizeof *v, cmp_double);
    *min = v[0];
    *max = v[n - 1];
    *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The steps' training kernel times and, on a measuring device, wall-clock times. */
static void step_stats(struct runner *r)
{
    size_t n = r->nstep_times;
    struct run_result *res = &r->res;
    res->steps_timed = (int64_t)n;
    if (!n)
        return;
    median_min_max(r->step_times, n, &res->step_seconds_median, &res->step_seconds_min, &res->step_seconds_max);
    if (res->measured)
        median_min_max(r->step_walls, n, &res->step_wall_seconds_median, &res->step_wall_seconds_min,
                       &res->step_wall_seconds_max);
}

/* A recorded segment op changes nothing by itself: observers (a replay's check) act on it. The kinds a
 * generated program is made of have their own run_ functions (below); these are the rest. */
static int execute_other(struct runner *r, const struct op *op, struct err *e)
{
    switch (op->kind) {
    case OP_ALLOC:
    case OP_FREE:
    case OP_KERNEL: break; /* emit's */
    case OP_EMPTY_CACHE: allocator_empty_cache(r->a); return 0;
    case OP_PHASE: enter_phase(r, op->name); return 0;
    case OP_STEP:
        take_times(r);
        if (r->res.steps > 0 && end_step(r, e))
            return -1;
        r->step_train = r->step_wall = 0; /* what ran before the first step is not a step's */
        r->res.steps = (int64_t)op->id;
        r->res.samples += op->bytes;
        return 0;
    case OP_RESET_PEAK: allocator_reset_peak_stats(r->a); return 0;
    case OP_RESET_ACCUMULATED: allocator_reset_accumulated_stats(r->a); return 0;
    /* The recorder's observer applies a recorded release; a release then new memory before the next
     * alloc is that alloc's own retry (see allocator_malloc_fresh). */
    case OP_SEGMENT_FREE:
    case OP_SEGMENT_UNMAP: r->recorded_release = true; return 0;
    case OP_SEGMENT_ALLOC:
    case OP_SEGMENT_MAP: r->recorded_fresh = r->recorded_release; return 0;
    case OP_RECORDED_OOM: return do_recorded_oom(r, op, e);
    case OP_RECORD_STREAM: return do_record_stream(r, op, e);
    case OP_SYNC: allocator_stream_sync(r->a, (uint64_t)op->stream); return 0;
    case OP_MARK: return 0;
    case OP_MANAGED_ALLOC: return do_managed_alloc(r, op, e);
    case OP_KIND_COUNT: break;
    }
    return err_set(e, ERR_INTERNAL, "op program has an op of unknown kind %d", (int)op->kind);
}

/* An op's row of hooks and bit of r->hooked: its kind, or OP_KIND_COUNT for an unknown kind. */
static inline unsigned hook_row(const struct op *op)
{
    return (unsigned)op->kind < OP_KIND_COUNT ? (unsigned)op->kind : OP_KIND_COUNT;
}

/* The hooks an op calls. */
static inline const struct kind_hooks *hooks_of(const struct runner *r, const struct op *op)
{
    return &r->hooks[hook_row(op)];
}

/* An op failed: later ops are refused; after an OOM the observers see the allocation that OOMed. */
static __attribute__((noinline, cold)) int stop(struct runner *r, const struct op *op)
{
    r->stopped = true;
    const struct kind_hooks *h = hooks_of(r, op);
    for (size_t i = 0; r->ended_by_oom && i < h->nafter; i++)
        h->after[i].fn(h->after[i].o, r, op, NULL, &(struct err){0});
    return -1;
}

/* An op executed with result rc: counted, or the runner stops (-1). */
static inline int op_done(struct runner *r, const struct op *op, int rc)
{
    if (rc)
        return stop(r, op);
    r->res.ops++;
    return 0;
}

/* Each kind of op in its own function, so a kernel's or a free's does not pay for an allocation's registers:
 * 0, or -1 (the op failed: the runner stops). block: where an ALLOC's block goes, or NULL. */
static __attribute__((noinline)) int run_alloc(struct runner *r, const struct op *op, struct alloc_block **block,
                                               struct err *e)
{
    struct alloc_block *b = NULL;
    int rc = op_done(r, op, do_alloc(r, op, &b, e));
    if (block)
        *block = b;
    return rc;
}
static __attribute__((noinline)) int run_free(struct runner *r, const struct op *op, struct err *e)
{
    return op_done(r, op, do_free(r, op, e));
}
static __attribute__((noinline)) int run_kernel(struct runner *r, const struct op *op, struct err *e)
{
    return op_done(r, op, do_kernel(r, op, e));
}
static __attribute__((noinline)) int run_other(struct runner *r, const struct op *op, struct err *e)
{
    return op_done(r, op, execute_other(r, op, e));
}
static inline int run_op(struct runner *r, const struct op *op, struct alloc_block **block, struct err *e)
{
    switch (op->kind) {
    case OP_ALLOC: return run_alloc(r, op, block, e);
    case OP_FREE: return run_free(r, op, e);
    case OP_KERNEL: return run_kernel(r, op, e);
    default: return run_other(r, op, e);
    }
}

/* emit for an op of a kind some observer hooks: its before_op hooks, the op, its on_op hooks. */
static __attribute__((noinline)) int emit_hooked(struct runner *r, const struct op *op, struct err *e)
{
    const struct kind_hooks *h = hooks_of(r, op);
    for (size_t i = 0; i < h->nbefore; i++)
        h->before[i].fn(h->before[i].o, op);
    struct alloc_block *block = NULL;
    if (run_op(r, op, &block, e))
        return -1;
    for (size_t i = 0; i < h->nafter; i++)
        if (h->after[i].fn(h->after[i].o, r, op, block, e))
            return -1;
    return 0;
}

static int emit(struct op_sink *sink, const struct op *op, struct err *e)
{
    struct runner *r = (struct runner *)sink;
    if (r->stopped)
        return -1;
    /* an op of a kind no observer hooks goes straight to its kind's function */
    if (!(r->hooked >> hook_row(op) & 1))
        return run_op(r, op, NULL, e);
    return emit_hooked(r, op, e);
}

static void on_alloc_event(void *ctx, const struct alloc_trace_event *ev)
{
    struct runner *r = ctx;
    for (size_t i = 0; i < r->nobservers; i++)
        if (r->observers[i]->on_alloc_event)
            r->observers[i]->on_alloc_event(r->observers[i], ev);
}

/* Library workspaces for the device (struct device_workspace), below. */
static int lend_workspace(void *user, uint64_t bytes, int stream, uint64_t *addr);
static void return_workspace(void *user, uint64_t addr);

struct runner *runner_create(struct device *dev, const struct alloc_config *cfg, const struct runner_options *opt)
{
    struct runner *r = prefault_calloc(sizeof *r); /* ~30 KiB (the result's inline arrays), cleared whole */
    if (!r)
        return NULL;
    r->sink.emit = emit;
    r->live.packed = true; /* ids hashed by open_index_hash_u64 */
    r->dev = dev;
    if (opt)
        r->opt = *opt;
    else
        r->opt.stable_names = true;
    if (!r->opt.where_unit)
        r->opt.where_unit = "op";
    snprintf(r->phase_name, sizeof r->phase_name, "start");
    r->res.measured = device_has(dev, DEVICE_MEASURED);
    r->launches = dev->ops->launch != NULL;
    r->runs_kernels = device_has(dev, DEVICE_RUNS_KERNELS);
    r->async_kernels = device_has(dev, DEVICE_ASYNC_KERNELS);
    if (!(r->a = allocator_create(dev, cfg))) {
        free(r);
        return NULL;
    }
    clock_gettime(CLOCK_MONOTONIC, &r->started);
    r->wall_mark = r->started;
    r->ws = (struct device_workspace){lend_workspace, return_workspace, r};
    if (dev->ops->set_workspace)
        dev->ops->set_workspace(dev, &r->ws);
    return r;
}

int runner_add_observer(struct runner *r, struct run_observer *o)
{
    if (r->nobservers == RUN_MAX_OBSERVERS || (o->on_tensor && r->tensor_obs))
        return -1;
    if (o->on_tensor)
        r->tensor_obs = o;
    r->observers[r->nobservers++] = o;
    for (unsigned k = 0; k <= OP_KIND_COUNT; k++) { /* an unknown kind (k == OP_KIND_COUNT): every kind's */
        struct kind_hooks *h = &r->hooks[k];
        uint32_t bit = k < OP_KIND_COUNT ? 1u << k : 0;
        if (o->before_op && (!o->before_kinds || (o->before_kinds & bit)))
            h->before[h->nbefore++] = (struct before_hook){o->before_op, o};
        if (o->on_op && (!o->on_op_kinds || (o->on_op_kinds & bit)))
            h->after[h->nafter++] = (struct after_hook){o->on_op, o};
        if (h->nbefore || h->nafter)
            r->hooked |= 1u << k;
    }
    if (o->on_alloc_event)
        allocator_set_trace(r->a, on_alloc_event, r);
    return 0;
}

struct allocator *runner_allocator(struct runner *r)
{
    return r->a;
}

/* The restored blocks in handles become live allocations under ids (category other, tagged by names); any
 * not handed to the live table go back to the allocator. rc: the restore's own result. */
static int adopt_restored(struct runner *r, struct alloc_block **handles, const uint64_t *ids,
                          const char *const *names, size_t n, int rc, struct err *e)
{
    for (size_t k = 0; rc == 0 && k < n; k++) {
        ptrdiff_t at = live_slot(r, ids[k], e);
        if (at < 0)
            rc = -1;
        else if (r->live.slots[at].item)
            rc = err_set(e, ERR_INPUT, "two live blocks at trace start have the same id 0x%llx",
                         (unsigned long long)ids[k]);
        else if (!add_live(r, (size_t)at, ids[k], handles[k], CAT_OTHER, names ? names[k] : NULL, true, e))
            rc = -1;
        else
            handles[k] = NULL;
    }
    for (size_t k = 0; k < n; k++)
        if (handles[k])
            allocator_free(r->a, handles[k]);
    free(handles);
    if (rc == 0)
        track_peaks(r);
    return rc;
}

int runner_restore_segment(struct runner *r, uint64_t size, uint64_t stream, bool small,
                           const struct restore_block *blocks, const uint64_t *ids, const char *const *names, size_t n,
                           uint64_t *addr, struct err *e)
{
    struct alloc_block **handles = calloc(n + 1, sizeof *handles);
    if (!handles)
        return err_set(e, ERR_INTERNAL, "out of host memory restoring a segment of %zu blocks", n);
    int rc = allocator_restore_segment(r->a, size, stream, small, blocks, n, handles, addr, e);
    return adopt_restored(r, handles, ids, names, n, rc, e);
}

int runner_restore_expandable(struct runner *r, uint64_t stream, bool small, const struct restore_block *ranges,
                              size_t nranges, const struct restore_block *blocks, const uint64_t *ids,
                              const char *const *names, size_t n, uint64_t *base, struct err *e)
{
    struct alloc_block **handles = calloc(n + 1, sizeof *handles);
    if (!handles)
        return err_set(e, ERR_INTERNAL, "out of host memory restoring an expandable segment of %zu blocks", n);
    int rc = allocator_restore_expandable(r->a, stream, small, ranges, nranges, blocks, n, handles, base, e);
    return adopt_restored(r, handles, ids, names, n, rc, e);
}

static int by_seq(const void *a, const void *b)
{
    uint64_t x = (*(struct live_tensor *const *)a)->seq, y = (*(struct live_tensor *const *)b)->seq;
    return x < y ? -1 : x > y;
}

/* The live tensors in allocation order: a new array of r->live.count, or NULL without host memory. */
static struct live_tensor **live_in_order(const struct runner *r)
{
    struct live_tensor **v = malloc((r->live.count + 1) * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && r->live.slots && i <= r->live.mask; i++)
        if (r->live.slots[i].item)
            v[n++] = r->live.slots[i].item;
    if (v)
        qsort(v, n, sizeof *v, by_seq);
    return v;
}

int runner_recover(struct runner *r, bool (*keep)(void *user, uint64_t id, uint8_t category), void *user,
                   struct err *e)
{
    if (!r->ended_by_oom)
        return err_set(e, ERR_INTERNAL, "runner_recover: the run did not end with an OOM");
    size_t n = r->live.count;
    struct live_tensor **order = live_in_order(r);
    if (!order)
        return err_set(e, ERR_INTERNAL, "out of host memory recovering from an OOM");
    r->stopped = r->ended_by_oom = false;
    r->res.oom = (struct run_oom){0};
    for (size_t k = 0; k < n; k++) { /* a FREE releases only its own tensor: the later ones stay live */
        if (keep(user, order[k]->id, order[k]->category))
            continue;
        struct op free_op = {.kind = OP_FREE, .id = order[k]->id};
        if (emit(&r->sink, &free_op, e)) {
            free(order);
            return -1;
        }
    }
    free(order);
    /* the training loop starts over: its steps are counted and timed afresh */
    r->res.steps = 0;
    r->res.samples = 0;
    r->nstep_times = 0;
    r->step_train = r->step_wall = 0;
    return 0;
}

const char *runner_live_tag(const struct runner *r, uint64_t id)
{
    const struct live_tensor *t = find_live(r, id);
    return t ? t->tag : NULL;
}

/* A library workspace for the device (struct device_workspace). */
static int lend_workspace(void *user, uint64_t bytes, int stream, uint64_t *addr)
{
    struct runner *r = user;
    if (r->nlent == sizeof r->lent / sizeof r->lent[0])
        return -1;
    const struct live_tensor *first = NULL; /* the first in allocation order of the program's free to lend */
    for (size_t k = 0; r->live.slots && k <= r->live.mask; k++) {
        const struct live_tensor *t = r->live.slots[k].item;
        if (!t || t->category != CAT_WORKSPACE || !block_of(t) || alloc_block_size(t->block) < bytes ||
            (first && first->seq < t->seq))
            continue;
        bool taken = false;
        for (size_t i = 0; i < r->nlent && !taken; i++)
            taken = r->lent[i].addr == alloc_block_addr(t->block);
        if (!taken)
            first = t;
    }
    if (first) {
        *addr = alloc_block_addr(first->block);
        r->lent[r->nlent++] = (struct lent_workspace){*addr, NULL};
        return 0;
    }
    struct alloc_block *b = NULL;
    struct alloc_oom oom;
    struct err e = {0};
    if (allocator_malloc(r->a, bytes, (uint64_t)stream, &b, &oom, &e) || !b)
        return -1;
    r->category_live[CAT_WORKSPACE] += alloc_block_size(b);
    track_peaks(r);
    *addr = alloc_block_addr(b);
    r->lent[r->nlent++] = (struct lent_workspace){*addr, b};
    return 0;
}

static void return_workspace(void *user, uint64_t addr)
{
    struct runner *r = user;
    for (size_t i = 0; i < r->nlent; i++) {
        if (r->lent[i].addr != addr)
            continue;
        if (r->lent[i].own) {
            r->category_live[CAT_WORKSPACE] -= alloc_block_size(r->lent[i].own);
            allocator_free(r->a, r->lent[i].own);
        }
        r->lent[i] = r->lent[--r->nlent];
        return;
    }
}

struct op_sink *runner_sink(struct runner *r)
{
    return &r->sink;
}

bool runner_stopped_by_oom(const struct runner *r)
{
    return r->ended_by_oom;
}

const struct run_result *runner_peek(const struct runner *r)
{
    return &r->res;
}

void runner_flush_times(struct runner *r)
{
    take_times(r);
}

uint64_t runner_oom_count(const struct runner *r)
{
    return r->res.nooms;
}

double runner_kernel_seconds(const struct runner *r)
{
    return r->res.kernel_seconds;
}

const uint64_t *runner_category_live(const struct runner *r)
{
    return r->category_live;
}

void runner_finish(struct runner *r, struct run_result *out)
{
    take_times(r);
    if (!r->ended_by_oom)
        end_point(r);
    struct phase_peak *last = r->phase;
    if (last && !last->delta_recorded) {
        last->device_used_delta = (int64_t)device_used(r) - (int64_t)r->phase_used_start;
        last->delta_recorded = true;
    }
    if (r->res.measured)
        r->res.wall_seconds = seconds_between(&r->started, &r->wall_mark);
    if (r->res.steps > 0 && !runner_stopped_by_oom(r))
        end_step(r, &(struct err){0}); /* without host memory for it, the last step goes untimed */
    step_stats(r);
    r->res.stats = *allocator_stats(r->a);
    *out = r->res;
}

void runner_destroy(struct runner *r)
{
    if (!r)
        return;
    /* managed pages still live: managed_current is their bytes (none without, so no walk of the table) */
    for (size_t i = 0; r->managed_current && i <= r->live.mask; i++) {
        struct live_tensor *t = r->live.slots[i].item;
        if (t && t->managed)
            free(t->pages);
    }
    open_index_free(&r->live);
    bump_free_all(&r->live_mem);
    HASH_FREE_ALL(hh, r->failed);
    if (r->dev->ops->set_workspace) /* the workspaces lent go back while the allocator exists */
        r->dev->ops->set_workspace(r->dev, NULL);
    allocator_destroy(r->a);
    kernel_cost_memo_free(&r->costs);
    free(r->step_times);
    free(r->step_walls);
    free(r);
}
