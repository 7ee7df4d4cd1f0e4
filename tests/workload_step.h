/* workload_step.h: for the workload tests: one job's program through the live sink, checked for
 * consistency and for what two AdamW steps leave: two fp32 moments per trained parameter, and nothing but
 * the parameters, that state and the cuBLAS workspace. */
#ifndef OOMLAB_TESTS_WORKLOAD_STEP_H
#define OOMLAB_TESTS_WORKLOAD_STEP_H

#include "tap.h"
#include "workload/generate.h"
#include "workload/live_sink.h"

static inline void check_adamw_steps(const struct job_spec *s, int64_t trained, const char *what)
{
    struct live_sink k;
    struct err e = {0};
    live_sink_init(&k, &e);
    int rc = workload_generate(s, &k.base, &e);
    ok(rc == 0 && live_sink_consistent(&k), "%s: the program is consistent %s", what, rc ? e.msg : "");
    is_int(k.cat[CAT_OPTIMIZER_STATE], 2 * 4 * trained, "%s: AdamW state for %lld parameters", what,
           (long long)trained);
    is_int(k.live - k.cat[CAT_PARAM] - k.cat[CAT_OPTIMIZER_STATE] - k.cat[CAT_WORKSPACE], 0,
           "%s: nothing else is live after the steps", what);
    live_sink_fini(&k);
}

#endif
