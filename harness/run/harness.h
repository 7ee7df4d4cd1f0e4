/* harness.h: running every variant of a scenario (before = the faults; each after = faults plus fixes)
 * through the workload generator and the runner on its device, and judging each against its expect:. */
#ifndef OOMLAB_HARNESS_H
#define OOMLAB_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "run/result.h"
#include "scenario/scenario.h"
#include "util/size.h"

struct harness_options {
    const char *device;  /* overrides every scenario's device ("sim:a100-80", "host", ...); NULL = the file's */
    struct capacity capacity; /* overrides the device capacity (a size or a fraction); {0, 0} = the device's */
    const char *snapshot_dir; /* each variant's run is written there as a PyTorch snapshot, SCENARIO--VARIANT.pickle */
    const char *plot_dir;     /* pictures there: SCENARIO--VARIANT-timeline and -segments, SCENARIO-variants (.svg, .png) */
    const char *perfetto_dir; /* each variant's run as a Perfetto/Chrome trace there, SCENARIO--VARIANT.json */
    uint64_t max_forwards;    /* the most forward passes a job may run; 0 = HARNESS_MAX_FORWARDS */
    FILE *program_out;        /* each op the runner executes, in the text form (a robust job's retries included) */
};

/* A job runs at most this many forward passes (steps x grad_accum, plus eval batches x sampling steps)
 * unless --max-forwards raises it: a scenario cannot make oomlab run for days by accident. */
#define HARNESS_MAX_FORWARDS 100000ULL


/* Runs every variant of sc; *out receives nvariants results (free with free()). */
int harness_run_scenario(const struct scenario *sc, const struct harness_options *opt, struct job_result **out,
                         struct err *e);
/* Runs one variant, with its job replaced by *job when job is not NULL. */
int harness_run_variant(const struct scenario *sc, const struct variant *v, const struct job_spec *job,
                        const struct harness_options *opt, struct job_result *r, struct err *e);
/* Opens the device a job runs on (opt->device, else the scenario's) and settles the job's cuBLAS
 * workspace per stream from it: the job's own when it sets one, else the device's (its architecture's
 * PyTorch default). `oomlab run`, `fit` and `program` all come through here, so the op program they
 * make allocates the workspace a GPU's cuBLAS then uses. NULL with e set. */
struct device *harness_open_device(const struct scenario *sc, const struct harness_options *opt, struct job_spec *job,
                                   struct err *e);
/* "convert_once,gradient_checkpointing" or "-" */
void variant_fixes_text(const struct variant *v, char *buf, size_t len);

#endif
