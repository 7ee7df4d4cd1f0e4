/* robust.h: an OOM-robust training script, step by step (job.robust): when a step runs out of memory it
 * catches the error, frees what the failed attempt held (leaving the except block drops the failed
 * step's tensors; zero_grad(set_to_none=True) drops its gradients), empties the cache and starts its
 * training loop again with half the batch (and, to keep the effective batch, twice the micro-batches),
 * down to a smallest batch and a number of retries. The model, its buffers, the optimizer's state,
 * the EMA and the cuBLAS workspace stay where they are, in the same allocator, fragmentation and all:
 * the retried program's setup is not run again, and the tensors it would create that already exist are
 * taken to be those. */
#ifndef OOMLAB_ROBUST_H
#define OOMLAB_ROBUST_H

#include <stdbool.h>
#include <stdint.h>

#include "run/runner.h"
#include "workload/spec.h"

#define ROBUST_MAX_ATTEMPTS ((16 + 1) * (1 + SPEC_MAX_FALLBACKS)) /* max_retries <= 16, per device */

struct robust_attempt {
    char device[64];
    int batch, grad_accum;
    bool oom;                   /* false: the attempt ran to the end */
    char phase[32], tag[192];   /* where it ran out of memory */
    int64_t step;
    int64_t steps_done;         /* optimizer steps it finished before the OOM: thrown away with it */
    uint64_t samples;           /* samples in the steps it began */
    double seconds;             /* kernel time it spent, as the device reports it */
    uint64_t freed;             /* bytes its recovery freed */
    uint64_t reserved_after;    /* reserved after the recovery's empty_cache */
};

struct robust_result {
    bool on;                    /* the job had an on_oom policy */
    int nattempts;
    struct robust_attempt attempts[ROBUST_MAX_ATTEMPTS];
    bool settled;               /* an attempt ran to the end */
    int batch, grad_accum;      /* ... with this batch */
    bool measured;              /* seconds measured (host, cuda) or modelled (sim) */
    int fit_batch;              /* what `oomlab fit` finds for a fresh process on the first device (0: none fits) */
    bool fit_known;
};

struct robust_run;

struct robust_run *robust_create(const struct job_spec *job);
void robust_destroy(struct robust_run *rr);

/* Observes the runner of one device (call before the first op). 0, or -1 out of memory. */
int robust_attach(struct robust_run *rr, struct runner *run);

/* Runs the job on the attached runner under its policy, appending each attempt to out (device names the
 * device in them): 0 when an attempt ran to the end, 1 when the last one the policy allows on this device
 * ran out of memory (the run ends with it), -1 with e on an error. */
int robust_generate(struct robust_run *rr, const char *device, struct robust_result *out, struct err *e);

#endif
