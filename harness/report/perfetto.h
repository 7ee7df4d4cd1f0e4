/* perfetto.h: a run as a trace in the Trace Event Format (JSON), which ui.perfetto.dev and chrome://tracing
 * open: a counter "allocated" with one series per category (chrome://tracing stacks them; Perfetto shows a
 * track per category, "allocated param", ...) and a counter "reserved" (series "bytes"), both at the
 * timeline's points, each point's maximum; the phases as slices on a "phases" track and the kernels as
 * slices on a "kernels" track ("X" events); the steps as instant events on the phases track and each
 * OOM as a global instant event ("i"). Timestamps are the run's kernel time in microseconds (modelled on
 * sim, measured on host and cuda); a run without kernel time (a replayed snapshot) is laid out at one
 * microsecond per op. Events are written in time order. */
#ifndef OOMLAB_PERFETTO_H
#define OOMLAB_PERFETTO_H

#include "run/result.h"
#include "run/timeline.h"
#include "util/err.h"

/* Writes the trace to path, whole or not at all. */
int perfetto_write(const char *path, struct timeline *t, const struct job_result *r, struct err *e);

#endif
