/* progress.h: a runner observer that shows long work on standard error, where a person watches: the
 * job and its step, redrawn in place at most every half second once the job has run a second, and
 * cleared at the end. Off unless standard error is a terminal (or OOMLAB_PROGRESS=1, for tests), so
 * logs and pipes get nothing. */
#ifndef OOMLAB_PROGRESS_H
#define OOMLAB_PROGRESS_H

#include <stdio.h>

#include "run/runner.h"

struct progress;

/* NULL when progress is off (or without host memory): nothing to attach. steps: the job's planned
 * optimizer steps (0 if unknown). */
struct progress *progress_create(FILE *out, const char *job, int steps);
struct run_observer *progress_base(struct progress *p);
void progress_destroy(struct progress *p); /* clears the line */

#endif
