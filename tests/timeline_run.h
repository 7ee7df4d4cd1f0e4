/* timeline_run.h: a small text trace run on a simulated card of 64 MiB with a timeline attached, shared by
 * the timeline, picture and trace tests. Its worked numbers (ops count from 1):
 *   op 1 phase load; op 2 param 8 MiB (a 20 MiB segment: reserved 20 MiB); op 3 step 1;
 *   op 4 phase forward; op 5 activation 16 MiB (its own 16 MiB segment: reserved 36 MiB, the reserved
 *   peak, allocated 24 MiB); op 6 temp 4 MiB (in the first segment: allocated 28 MiB, the allocated
 *   peak); op 7 frees it; op 8 phase backward; op 9 frees the activation; op 10 asks for 48 MiB:
 *   20 + 48 > 64 even after the free 16 MiB segment goes back, so it OOMs (rounded 48 MiB) and ends
 *   the run with 20 MiB reserved. The sim has no kernels to time here: the timeline runs over ops. */
#ifndef OOMLAB_TIMELINE_RUN_H
#define OOMLAB_TIMELINE_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "device/sim.h"
#include "replay/replay.h"
#include "replay/trace_input.h"
#include "run/result.h"
#include "run/timeline.h"
#include "util/size.h"

static const char TINY_TRACE[] = "phase load\n"
                                 "alloc w 8388608 s0 param model.weight\n"
                                 "step 1 samples 1\n"
                                 "phase forward\n"
                                 "alloc a 16777216 s0 activation model.block\n"
                                 "alloc x 4194304 s0 temp model.block\n"
                                 "free x\n"
                                 "phase backward\n"
                                 "free a\n"
                                 "alloc big 50331648 s0 activation model.head\n";

/* Runs TINY_TRACE; *tl (timeline_destroy it) and *r hold the run. 0, or -1 after a diagnostic. */
static int tiny_run(struct timeline **tl, struct job_result *r)
{
    *tl = NULL;
    char path[] = "/tmp/oomlab-tiny-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, TINY_TRACE, sizeof TINY_TRACE - 1) != (ssize_t)(sizeof TINY_TRACE - 1)) {
        printf("# cannot write %s\n", path);
        return -1;
    }
    close(fd);
    *r = (struct job_result){.has_expect = true, .device_total = 64 * MiB};
    snprintf(r->group, sizeof r->group, "tiny");
    snprintf(r->name, sizeof r->name, "before");
    snprintf(r->device, sizeof r->device, "sim:64MiB");
    snprintf(r->fixes, sizeof r->fixes, "-");
    struct device *dev = sim_device_create("sim:64MiB", 64 * MiB, 0, NULL);
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    struct runner *run = dev ? runner_create(dev, &cfg, NULL) : NULL;
    struct trace_input *in = trace_input_open(path, &(struct err){0});
    struct err e = {0};
    *tl = timeline_create(TIMELINE_POINTS);
    int rc = -1;
    if (run && in && *tl && timeline_attach(*tl, run) == 0) {
        rc = text_trace_run(in, runner_sink(run), &e);
        if (rc && runner_stopped_by_oom(run))
            rc = 0; /* the OOM is the result */
        else if (rc)
            printf("# %s\n", e.msg);
        runner_finish(run, &r->run);
        timeline_finish(*tl);
        snprintf(r->timed_by, sizeof r->timed_by, "%s", dev->timed_by);
    }
    trace_input_close(in);
    runner_destroy(run);
    if (dev)
        dev->ops->destroy(dev);
    unlink(path);
    return rc;
}

/* Removes a test's temporary directory and what it holds. */
static inline void remove_tmp_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd))
        printf("# could not remove %s\n", dir);
}

#endif
