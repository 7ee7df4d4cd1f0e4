/* fit.h: the largest batch size (or sequence length) with which a scenario variant still fits its
 * device: exponential search up from 1, then bisection, each probe a full run of the job. */
#ifndef OOMLAB_FIT_H
#define OOMLAB_FIT_H

#include "run/harness.h"

enum fit_param { FIT_BATCH, FIT_SEQ_LEN, FIT_IMAGE_SIZE };

struct fit_result {
    int largest;          /* 0: even 1 does not fit */
    int probes;
    struct run_result at_largest;
    bool hit_limit;       /* still fits at the search limit */
};

int fit_variant(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                enum fit_param param, int limit, struct fit_result *out, struct err *e);

#endif
