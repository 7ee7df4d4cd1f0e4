/* runner.h: executes an op program, whatever produced it (the workload generator, a text trace, a
 * PyTorch snapshot): every ALLOC and FREE goes through the allocator model on a device, every KERNEL is
 * launched on it and the device reports the kernel time (modelled on sim, measured on host and cuda: the
 * device's kind says which), and the run's memory figures are collected: peaks, the reserved-but-
 * unallocated memory at the reserved peak, the live bytes per category at the allocated peak, per-phase
 * peaks, and each OOM with the phase, step and module tag it happened in. Observers see every op and
 * every allocator event (a replay's check against its recording is one). */
#ifndef OOMLAB_RUNNER_H
#define OOMLAB_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "alloc/allocator.h"
#include "program/program.h"

#define RUN_MAX_PHASES 24
#define RUN_MAX_OOMS 8      /* OOMs kept in detail; the rest are counted */
#define RUN_MAX_WARNINGS 8  /* warnings kept in full; the rest are counted */
#define RUN_MAX_POINTS 48   /* phase ends kept: steps 1 and 2 (setup, then steady), and the last step */

/* Memory at a point of a step a user thinks in: the end of a phase (load, forward, backward, optimizer, zero_grad,
 * ema, eval, ...). */
struct run_point {
    char phase[32];
    int64_t step;                      /* 0: before the first step (load) */
    uint64_t allocated, reserved;
    uint64_t category[CAT_COUNT];      /* allocated block bytes per category */
};

struct phase_peak {
    char name[32];
    uint64_t peak_allocated, peak_reserved;
    int64_t peak_allocated_step, peak_reserved_step; /* the step each peak happened in (0: before the first) */
    double seconds; /* kernel time in this phase, as the device reports it */
    double flops;   /* of the kernels run in this phase */
    int64_t device_used_delta; /* change of the device's used memory (total - free, cudaMemGetInfo on cuda)
                                * over the phase's first occurrence, where it grows */
    bool delta_recorded;
};

struct run_oom {
    bool happened;
    uint64_t where;                    /* the op's position in its source (0: generated) */
    char phase[32], tag[192];
    int64_t step;
    enum category category;
    uint64_t bytes;
    uint64_t category_live[CAT_COUNT]; /* allocated block bytes per category when the OOM hit */
    char message[1024];
};

struct run_result {
    struct alloc_stats stats;
    uint64_t peak_allocated, peak_reserved;
    /* Where each peak happened: the step (0: before the first) and the phase, as the first step's peaks
     * differ from the steady state's (optimizer state appears at the first step's optimizer). */
    int64_t peak_allocated_step, peak_reserved_step;
    char peak_allocated_phase[32], peak_reserved_phase[32];
    uint64_t unallocated_at_peak;          /* reserved - allocated when reserved peaked */
    /* Unified memory outside the allocator (OP_MANAGED_ALLOC, paged optimizer state): the most resident
     * on the device at once, and the bytes that found no room there and stayed on the host. */
    uint64_t managed_peak, managed_on_host;
    uint64_t category_at_peak[CAT_COUNT];  /* allocated block bytes per category when allocated peaked */
    struct phase_peak phases[RUN_MAX_PHASES];
    size_t nphases;
    struct run_point points[RUN_MAX_POINTS]; /* phase ends, in order (steps 1, 2 and the last) */
    size_t npoints;
    struct run_oom oom;                    /* the first OOM (oom.happened) */
    struct run_oom ooms[RUN_MAX_OOMS];     /* the first RUN_MAX_OOMS, oom among them */
    uint64_t nooms;                        /* all of them */
    char warnings[RUN_MAX_WARNINGS][256];  /* the first warnings (a replay's frees of unknown blocks, ...) */
    uint64_t nwarnings;                    /* all of them */
    uint64_t frees_of_unknown;             /* frees of allocations that failed or never existed (lenient runs) */
    uint64_t ops;                          /* ops executed */
    uint64_t allocs, frees, kernels;
    int64_t steps;                         /* training steps begun */
    uint64_t samples;                      /* training samples in those steps (batch x micro-batches) */
    /* Kernel time of the training phases (phase_is_training) in each completed step, modelled or
     * measured: its median, min and max over steps_timed steps (0 if none completed). */
    double step_seconds_median, step_seconds_min, step_seconds_max;
    /* On a measuring device, the wall-clock time of the same phases per step (the allocator model,
     * the host's side of each launch, waiting for the GPU): median, min, max; 0 on a modelled one. */
    double step_wall_seconds_median, step_wall_seconds_min, step_wall_seconds_max;
    int64_t steps_timed;
    double flops, bytes_moved;
    double kernel_seconds;                 /* of every kernel, as the device reports it */
    double wall_seconds;                   /* the run's wall-clock time on a measuring device; 0 on a modelled one */
    bool measured;                         /* the device's DEVICE_MEASURED */
};

struct runner;

/* How the runner treats what a generated program never does. */
struct runner_options {
    /* An allocation that OOMs is reported and does not exist afterwards, and the run goes on, as a
     * script that catches the error would (replay). Otherwise the first OOM ends the run. */
    bool continue_after_oom;
    /* A free of an allocation that is not live, or an allocation under an id that is still live (the
     * earlier block is freed first), is a warning instead of an error (snapshots, which are keyed by
     * address and may have lost events). */
    bool lenient_ids;
    /* What an op's `where` counts, for warnings: "line" (text traces) or "event" (snapshots). */
    const char *where_unit;
    /* The GPU's number in OOM messages ("GPU 1 has a total capacity of ..."): a replayed snapshot's device. */
    int device_index;
    /* Every op name's pointer names the same text for the whole run (interned, as the workload generator's
     * are), so observers may know a name by its pointer; otherwise a name's buffer may be rewritten between
     * ops (a text trace's line). */
    bool stable_names;
};

/* A live tensor with a block, as on_tensor sees it. */
struct run_tensor {
    uint64_t id;
    uint64_t bytes;   /* its block's */
    const char *tag;  /* the ALLOC op's name, or a restored block's (may be NULL) */
    uint8_t category; /* enum category */
    bool restored;    /* live at a recording's start (runner_restore_*), not allocated by an op */
    bool stable_tag;  /* the run's names are stable (runner_options.stable_names): tag's pointer is its text */
};

/* Sees the run as it happens. Any function may be NULL; a nonzero return from on_op stops the run
 * with the error in e. */
struct run_observer {
    /* A tensor with a block became live (live: an ALLOC's, or a block restored live at a recording's
     * start) or is about to be freed (a FREE, runner_recover's, an id allocated again while live under
     * lenient ids), within the op, before on_op. *note is a word the runner keeps with the tensor for
     * this observer: NULL when it becomes live, then what the observer left there, so the observer needs
     * no index of its own. At most one observer of a runner has this hook. */
    void (*on_tensor)(struct run_observer *o, const struct run_tensor *t, void **note, bool live);
    /* before the runner executes op */
    void (*before_op)(struct run_observer *o, const struct op *op);
    /* every allocator trace event (segment_alloc, segment_free, map, unmap, oom, ...) */
    void (*on_alloc_event)(struct run_observer *o, const struct alloc_trace_event *ev);
    /* an ALLOC found no memory (an OOM; not an OP_RECORDED_OOM's), before on_op: the live tensors are those
     * before it */
    void (*on_oom)(struct run_observer *o, const struct op *op);
    /* after the runner executed op; for ALLOC, block is the new block (NULL: zero bytes, or an OOM) */
    int (*on_op)(struct run_observer *o, struct runner *r, const struct op *op, const struct alloc_block *block,
                 struct err *e);
    /* The op kinds before_op and on_op are called for, as bits (1u << OP_...); 0: every kind. */
    uint32_t before_kinds, on_op_kinds;
};

/* The phases of a training step proper: forward, backward, optimizer and EMA update (not load, eval,
 * decode, or a debugger's extra forwards). */
bool phase_is_training(const char *name);
/* The phases of an eval: sampling (eval) and the VAE decode. */
bool phase_is_eval(const char *name);

/* A runner of op programs on dev under cfg; opt NULL: a generated program's rules (the first OOM ends the
 * run; ids must be consistent; names are stable). A device with library workspaces (set_workspace) takes them from the
 * runner's allocator model, as PyTorch takes them from its caching allocator: a request for a cuBLAS
 * workspace the op program already allocated gets that block; anything else is a new allocation
 * (category workspace). runner_destroy gives them back, so the device may outlive the runner. */
struct runner *runner_create(struct device *dev, const struct alloc_config *cfg, const struct runner_options *opt);
/* Up to 6 observers, called in the order added; they must outlive the runner's last op. 0, or -1 (a
 * seventh, or a second with on_tensor). */
int runner_add_observer(struct runner *r, struct run_observer *o);
struct allocator *runner_allocator(struct runner *r);
struct op_sink *runner_sink(struct runner *r);

/* A segment that existed before the ops start (a snapshot recorded mid-run), with its live blocks,
 * which become live allocations under ids[k] (category other, tagged names[k]: where each was allocated,
 * or NULL; names NULL: none is known); *addr receives the segment's address. */
int runner_restore_segment(struct runner *r, uint64_t size, uint64_t stream, bool small,
                           const struct restore_block *blocks, const uint64_t *ids, const char *const *names, size_t n,
                           uint64_t *addr, struct err *e);

/* The same for an expandable segment: its reservation at *base, ranges[] mapped (offsets from the base). */
int runner_restore_expandable(struct runner *r, uint64_t stream, bool small, const struct restore_block *ranges,
                              size_t nranges, const struct restore_block *blocks, const uint64_t *ids,
                              const char *const *names, size_t n, uint64_t *base, struct err *e);

/* Adds a warning to the run's (struct run_result warnings). */
void runner_warn(struct runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The tag of the live allocation under id (its ALLOC op's name, or a restored block's), or NULL when it has
 * none or nothing is live under id. The pointer is the op's or restore's own: valid while its producer
 * lives. */
const char *runner_live_tag(const struct runner *r, uint64_t id);

/* True once an allocation hit an OOM that ends the run: the sink refuses further ops, as the training
 * script would crash. */
bool runner_stopped_by_oom(const struct runner *r);
/* After an OOM that ended the run, go on as a training script that catches it: every live tensor for which
 * keep() is false is freed (FREE ops, which observers see) and the runner takes ops again; the OOM stays in
 * the run's list (ooms, nooms) but no longer ends it (oom), and the training loop's steps are counted and
 * timed afresh. 0, or -1 with e (ERR_INTERNAL if the run had not ended with an OOM). */
int runner_recover(struct runner *r, bool (*keep)(void *user, uint64_t id, uint8_t category), void *user,
                   struct err *e);
/* The run so far: its peaks, steps and samples, and the OOM that ended it (oom), as runner_finish would give them. */
const struct run_result *runner_peek(const struct runner *r);
/* Reads the time of every kernel launched so far (an asynchronous device's is otherwise read when a phase
 * or step ends), so runner_kernel_seconds includes them. */
void runner_flush_times(struct runner *r);
/* The OOMs so far. */
uint64_t runner_oom_count(const struct runner *r);
/* The run so far, for observers: the kernel time the device has reported (after each kernel on a
 * synchronous device; at phase and step boundaries on an asynchronous one) and the allocated block bytes
 * per category (CAT_COUNT entries, summing to the allocator's allocated bytes). */
double runner_kernel_seconds(const struct runner *r);
const uint64_t *runner_category_live(const struct runner *r);
void runner_finish(struct runner *r, struct run_result *out);
void runner_destroy(struct runner *r);

#endif
