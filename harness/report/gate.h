/* gate.h: the CI gate: a run's results compared with a baseline results document, job by job (a scenario's
 * variant, a replayed file, a fit): peak allocated and peak reserved, fits or OOMs, and modelled throughput.
 * A peak more than the tolerance above the baseline, a job that fitted and now OOMs, modelled samples/s
 * more than the tolerance below, or a baseline job that is gone, is a regression. Measured throughput
 * varies from run to run and is not gated. */
#ifndef OOMLAB_GATE_H
#define OOMLAB_GATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "util/err.h"

enum gate_verdict { GATE_SAME, GATE_IMPROVED, GATE_REGRESSED, GATE_NEW, GATE_MISSING };

struct gate_row {
    char group[256], job[64];
    const char *metric;        /* "peak allocated", "peak reserved", "outcome", "samples/s", "job" */
    double base, now;          /* bytes, samples/s, or 0/1 for fits/OOM */
    enum gate_verdict verdict;
};

struct gate_result {
    struct gate_row *rows;
    size_t nrows;
    size_t jobs, regressions, improvements;
};

/* Compares two results documents (report_json_document's schema). ERR_INPUT when either is not one. */
int gate_compare(const json_t *baseline, const json_t *now, double tolerance, struct gate_result *out, struct err *e);
void gate_result_free(struct gate_result *r);

/* What regressed and what improved, in human units, lines under 100 columns. */
void gate_print(FILE *f, const struct gate_result *r, double tolerance);
/* JUnit XML: a testsuite per group, a testcase per job, a failure for each regressed job. */
int gate_write_junit(const char *path, const struct gate_result *r, double tolerance, struct err *e);

#endif
