/* runner.h: executes an op program: every ALLOC and FREE goes through the allocator model on a device,
 * every KERNEL is launched on it and the device reports the kernel time (modelled on sim, measured on
 * host and cuda: the device's kind says which), and the run's memory figures are collected: peaks, the
 * reserved-but-unallocated memory at the reserved peak, the live bytes per category at the allocated
 * peak, per-phase peaks, and the OOM with the phase, step and module tag it happened in. */
#ifndef OOMLAB_RUNNER_H
#define OOMLAB_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "alloc/allocator.h"
#include "program/program.h"

#define RUN_MAX_PHASES 24

struct phase_peak {
    char name[32];
    uint64_t peak_allocated, peak_reserved;
    double seconds; /* kernel time in this phase, as the device reports it */
    double flops;   /* of the kernels run in this phase */
    int64_t device_used_delta; /* change of the device's used memory (total - free, cudaMemGetInfo on cuda)
                                * over the phase's first occurrence, where it grows */
    bool delta_recorded;
};

struct run_oom {
    bool happened;
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
    uint64_t unallocated_at_peak;          /* reserved - allocated when reserved peaked */
    uint64_t category_at_peak[CAT_COUNT];  /* allocated block bytes per category when allocated peaked */
    struct phase_peak phases[RUN_MAX_PHASES];
    size_t nphases;
    struct run_oom oom;
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

/* The phases of a training step proper: forward, backward, optimizer and EMA update (not load, eval,
 * decode, or a debugger's extra forwards). */
bool phase_is_training(const char *name);
/* The phases of an eval: sampling (eval) and the VAE decode. */
bool phase_is_eval(const char *name);

/* A runner of op programs on dev under cfg. A device with library workspaces (set_workspace) takes them
 * from the runner's allocator model, as PyTorch takes them from its caching allocator: a request for a
 * cuBLAS workspace the op program already allocated gets that block; anything else is a new allocation
 * (category workspace). runner_destroy gives them back, so the device may outlive the runner. */
struct runner *runner_create(struct device *dev, const struct alloc_config *cfg);
struct op_sink *runner_sink(struct runner *r);
/* True once an allocation hit an OOM: the sink refuses further ops, as the training script would crash. */
bool runner_stopped_by_oom(const struct runner *r);
void runner_finish(struct runner *r, struct run_result *out);
void runner_destroy(struct runner *r);

#endif
