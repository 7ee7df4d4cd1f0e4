/* live_run.h: for workload tests, one job generated into a live sink (live ALLOC bytes per mark, no
 * allocator), kept until the next run so the marks' names stay valid. Include in one test file. */
#ifndef OOMLAB_TESTS_LIVE_RUN_H
#define OOMLAB_TESTS_LIVE_RUN_H

#include "tap.h"
#include "workload/generate.h"
#include "workload/live_sink.h"

static struct live_sink sink;
static struct workload *w;

/* 0 if the job ran and its stream is consistent. */
static int gen(const struct job_spec *s)
{
    struct err e = {0};
    live_sink_fini(&sink);
    live_sink_init(&sink, &e);
    workload_destroy(w);
    w = workload_create(s, &e);
    int rc = w ? workload_run(w, &sink.base, &e) : -1;
    if (rc < 0)
        diag("generate: %s", e.msg);
    return rc == 0 && live_sink_consistent(&sink) ? 0 : -1;
}

/* The first mark of that name; a mark of live and peak -1 when there is none. */
static const struct live_mark *mark(const char *name)
{
    static const struct live_mark none = {.live = -1, .peak_after = -1};
    const struct live_mark *m = live_sink_mark(&sink, name, 0);
    return m ? m : &none;
}

static void live_run_init(void)
{
    struct err e = {0};
    live_sink_init(&sink, &e);
}

static void live_run_fini(void)
{
    live_sink_fini(&sink);
    workload_destroy(w);
}

#endif
