/* workload_run.h: the workload tests' way to run a job into the live-bytes sink (included by one test
 * file each; TAP's diag from tap.h). */
#ifndef OOMLAB_TESTS_WORKLOAD_RUN_H
#define OOMLAB_TESTS_WORKLOAD_RUN_H

#include "workload/generate.h"
#include "workload/live_sink.h"

static struct workload *last; /* kept until the next run: the sink's mark names are its strings */

static int run(const struct job_spec *s, struct live_sink *k)
{
    struct err e = {0};
    live_sink_init(k, &e);
    workload_destroy(last);
    last = workload_create(s, &e);
    int rc = last ? workload_run(last, &k->base, &e) : -1;
    if (rc < 0)
        diag("generate failed: %s", e.msg);
    return rc;
}

#endif
