/* fit.h: the largest batch size (or sequence length, or image size) with which a scenario variant
 * still fits its device, or the smallest world size or tensor-parallel degree (job.parallel), optionally with a
 * share of the device left free at the peak (headroom for what the model does not see: other
 * processes, a different context size): exponential search up from 1, then bisection, each probe a
 * full run of the job. */
#ifndef OOMLAB_FIT_H
#define OOMLAB_FIT_H

#include "run/harness.h"

enum fit_param { FIT_BATCH, FIT_SEQ_LEN, FIT_IMAGE_SIZE, FIT_WORLD_SIZE, FIT_TENSOR_PARALLEL };

#define FIT_MAX_LIMIT (1 << 20) /* the largest --limit: doubling from 1 stays within an int */

struct fit_options {
    enum fit_param param;
    int limit;            /* largest value tried */
    double margin;        /* share of the device's capacity that must stay free at the reserved peak, [0, 1) */
};

struct fit_result {
    int largest;          /* 0: even 1 does not fit; FIT_WORLD_SIZE, FIT_TENSOR_PARALLEL: the smallest that
                           * fits, 0 none up to the limit (or the largest degree the model divides into) */
    int probes;
    struct job_result at_largest;    /* the run at the largest value (memory, throughput); if none fits, the
                                      * first probe's run (its device and names) */
    bool hit_limit;       /* still fits at the search limit (never with FIT_WORLD_SIZE) */
};

int fit_variant(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                const struct fit_options *fo, struct fit_result *out, struct err *e);

#endif
