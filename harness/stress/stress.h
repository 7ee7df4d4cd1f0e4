/* stress.h: `oomlab stress`: each profile kind (profile.h) generates an op program as it runs, reading
 * the allocator's state between ops, and feeds it to the one runner and allocator model on a device,
 * once per allocator setting. What it finds goes into a struct stress_result beside the run's figures
 * (a struct job_result), with the checks it made; report/stress_out.c prints them. */
#ifndef OOMLAB_STRESS_H
#define OOMLAB_STRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "device/nvml.h"
#include "run/result.h"
#include "stress/profile.h"
#include "util/size.h"

#define STRESS_MAX_POINTS 1000
#define STRESS_MAX_CHECKS 8

/* A check the run made (an invariant, a return to the baseline); a failed one fails the job (exit 1). */
struct stress_check {
    char what[96];
    bool ok;
    char detail[256]; /* the first failure, or what held */
};

/* The allocator at one point of a run. */
struct stress_point {
    uint64_t op;            /* ops generated so far */
    uint64_t allocated, reserved, largest_free;
    uint64_t ooms;          /* so far */
};

struct stress_result {
    int kind;                   /* enum stress_kind */
    uint64_t capacity;          /* the device's total (what cudaMemGetInfo reports) */
    uint64_t device_free_start; /* its free memory before the first op */
    uint64_t device_used_end;   /* total - free at the end (cudaMemGetInfo on cuda) */
    /* fill */
    uint64_t blocks, usable_bytes, requested_bytes, end_reserved, end_allocated, oom_request;
    bool ended_by_oom;
    /* churn: the allocator over time (points), and the worst fragmentation seen */
    struct stress_point points[STRESS_MAX_POINTS];
    size_t npoints;
    uint64_t ops, ooms, max_fragmentation;
    uint64_t burn_gemms;        /* churn's compute load: GEMMs run */
    double burn_flops;
    /* oom_storm */
    uint64_t recoveries, drifts;
    /* soak */
    int64_t steps_run;
    uint64_t steady_allocated, steady_reserved;
    int64_t allocated_growth, reserved_growth; /* last step end minus the first after warm-up */
    uint64_t invariant_checks;
    /* streams */
    uint64_t record_streams, syncs, peak_pending_blocks, peak_pending_bytes;
    /* a real GPU: NVML's readings of it before the first op and after the last (measured) */
    bool telemetry;
    struct nvml_gpu gpu_start, gpu_end;
    char telemetry_why[160];    /* why there are none, on a GPU NVML could not read */
    struct stress_check checks[STRESS_MAX_CHECKS];
    int nchecks;
};

bool stress_ok(const struct stress_result *s); /* every check held */

struct stress_options {
    const char *device;        /* overrides the profile's device; NULL: the profile's */
    struct capacity capacity;  /* overrides the device's capacity; {0, 0}: its own */
    uint64_t max_forwards;     /* soak: the most forward passes its job may run; 0: the harness's limit */
    const char *program_dir;   /* each setting's executed op program, as text, in DIR/NAME--N.trace (N from 1) */
};

/* Runs the profile under each of its allocator settings: jobs[i] and res[i] for setting i (nsettings of
 * each, calloc'd by the caller). 0, or -1 with e (ERR_INPUT for a profile that cannot run as written). */
int stress_run(const struct stress_profile *p, const struct stress_options *opt, struct job_result *jobs,
               struct stress_result *res, struct err *e);

#endif
