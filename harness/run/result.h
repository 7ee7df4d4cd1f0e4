/* result.h: the one result type of oomlab's commands. A job is a scenario variant (run, fit) or a
 * replayed trace (replay); every writer in report/ takes these. */
#ifndef OOMLAB_RESULT_H
#define OOMLAB_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "run/holders.h"
#include "run/robust.h"
#include "run/runner.h"
#include "workload/generate.h"
#include "workload/parallel_pipeline.h"

/* How a replayed snapshot matched what it recorded (replay/recorded.c fills it). */
struct recorded_check {
    size_t segment_allocs_recorded, segment_allocs_matched; /* size and place in the event order */
    size_t segment_maps_recorded, segment_maps_matched;     /* expandable segments' maps, alike */
    bool final_layout_matched;
    size_t final_segments, final_segments_matched; /* the file's final segments, and how many the model laid out alike */
    size_t allocs, addresses_matched;
    size_t ooms_recorded, ooms_reproduced; /* requests the recording OOMed on, and how many OOM here too */
    char first_mismatch[512];
    /* The figures at the end of the trace: as the file records its final state, and as replayed. */
    uint64_t recorded_reserved, recorded_allocated, replayed_reserved, replayed_allocated;
};

/* How a replay was set up, and why: a replay reproduces the recording unless told otherwise. */
struct replay_info {
    const char *input_kind;   /* "PyTorch snapshot" or "text trace" */
    bool rebuilt_start;       /* recording began mid-run: the state at trace start was rebuilt */
    size_t inferred_sizes;    /* ... where this many blocks' sizes came from the split rules */
    size_t private_pool_segments; /* segments of CUDA graphs' private pools, replayed as ordinary ones */
    char settings_from[160];  /* where the allocator settings came from */
    char capacity_from[160];  /* why the device has the capacity it has */
    bool what_if;             /* other settings or another device than the recording's */
    uint64_t needed;          /* peak reserved with room to spare: a device of this capacity holds the trace */
    uint64_t start_reserved;  /* reserved in the state at trace start (rebuilt_start) */
    char addresses[160];      /* how new segments were placed */
    bool checked;             /* a snapshot: check says how the run matched its recording */
    struct recorded_check check;
};

/* The replay ended with other figures than its recording's final state. */
static inline bool replay_drifted(const struct recorded_check *c)
{
    return c->replayed_reserved != c->recorded_reserved || c->replayed_allocated != c->recorded_allocated;
}

/* One stage's run of a pipeline-parallel job (job.parallel.pipeline_parallel). */
struct pipe_stage_result {
    int first_layer, last_layer;   /* its layers [first, last) */
    int in_flight;                 /* micro-batches whose activations it holds at once */
    bool oom;
    uint64_t peak_allocated, peak_reserved;
    uint64_t params;               /* parameter bytes at its allocated peak */
    double step_seconds;           /* its training step's kernel time (0: it OOMed) */
};

struct job_result {
    /* What ran. */
    char group[256];         /* the scenario's name, or the replayed file */
    char name[64];           /* the variant, or "replay" */
    char fixes[256];         /* "convert_once,gradient_checkpointing", or "-" */
    char alloc_conf[512];    /* the allocator settings it ran under, PYTORCH_CUDA_ALLOC_CONF text ("" = defaults) */
    char device[64];
    char device_detail[128]; /* what the device's name leaves out (struct device.detail) */
    uint64_t device_total;
    char timed_by[256];      /* how the device obtained kernel time (struct device.timed_by) */
    int steps_planned;       /* the job's optimizer steps (0 for a replay) */
    bool has_assumptions;    /* a generated job (not a replay): what its op program assumed */
    struct job_assumptions assumptions;
    struct run_result run;

    /* A scenario variant's expect: (has_expect false for a replay). */
    bool has_expect, expect_oom, expect_ok;
    char expect_why[256];    /* what differed, when !expect_ok */

    /* Throughput of the training phases. */
    double train_seconds;    /* kernel time in the training phases (phase_is_training) */
    double train_flops;      /* FLOPs of the kernels in those phases */
    double steps_per_s, samples_per_s;

    struct replay_info replay; /* a replay only */

    struct holders_result holders; /* what held the memory at the peak and the OOM, and what grew */

    struct robust_result robust; /* job.robust: every attempt and where it settled (robust.on) */

    /* Pipeline-parallel: every stage's run (pipe_stages of them, 0 otherwise); the figures above are
     * stage pipe_shown's, the first that OOMs, else the one whose reserved peak is highest. */
    int pipe_stages, pipe_shown, pipe_micro_batches;
    char pipe_schedule[8];
    struct pipe_stage_result pipe[PIPE_MAX_STAGES];
};

/* "OOM in backward, step 2 (decoder.block.3.ffn)" or "fits" */
void job_outcome(const struct job_result *r, char *buf, size_t len);
/* Kernel time, FLOPs and the steps/s and samples/s of the training phases: on a measured device from
 * the median step (robust to a noisy machine), on sim from the modelled total over the steps. */
void job_throughput(struct job_result *r);

#endif
