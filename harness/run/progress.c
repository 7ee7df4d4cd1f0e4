/* progress.c: progress of long work on a terminal (see progress.h). */
#include "run/progress.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct progress {
    struct run_observer base; /* first */
    FILE *out;
    char job[336];
    int steps;
    double started, drawn;
    bool shown;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void before_op(struct run_observer *base, const struct op *op)
{
    struct progress *p = (struct progress *)base;
    if (op->kind != OP_STEP && op->kind != OP_PHASE)
        return;
    double t = now();
    if (t - p->started < 1.0 || t - p->drawn < 0.5)
        return;
    p->drawn = t;
    p->shown = true;
    if (op->kind == OP_STEP && p->steps > 0)
        fprintf(p->out, "\r\033[K%s: step %llu of %d (%.0f s)", p->job, (unsigned long long)op->id, p->steps,
                t - p->started);
    else if (op->kind == OP_STEP)
        fprintf(p->out, "\r\033[K%s: step %llu (%.0f s)", p->job, (unsigned long long)op->id, t - p->started);
    else
        fprintf(p->out, "\r\033[K%s: %s (%.0f s)", p->job, op->name ? op->name : "-", t - p->started);
    fflush(p->out);
}

struct progress *progress_create(FILE *out, const char *job, int steps)
{
    const char *force = getenv("OOMLAB_PROGRESS");
    if (!(force && !strcmp(force, "1")) && !isatty(fileno(out)))
        return NULL;
    struct progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->base.before_op = before_op;
    p->out = out;
    snprintf(p->job, sizeof p->job, "%s", job);
    p->steps = steps;
    p->started = now();
    if (force && !strcmp(force, "1"))
        p->started -= 1.0; /* tests: show from the first step */
    return p;
}

struct run_observer *progress_base(struct progress *p)
{
    return &p->base;
}

void progress_destroy(struct progress *p)
{
    if (!p)
        return;
    if (p->shown) {
        fprintf(p->out, "\r\033[K");
        fflush(p->out);
    }
    free(p);
}
