/* report.h: the one set of writers for run, fit and replay. A report group is what one table shows: a
 * scenario's variants (run), a replayed trace (replay), or the largest value each variant fits with
 * (fit). Each group goes to a human-readable table, JSON (one versioned schema, PyTorch's
 * memory_stats key names kept: docs/results-schema.md), CSV (one row per job) and TAP (one line per
 * expectation). Every figure says whether it is measured or modelled. */
#ifndef OOMLAB_REPORT_H
#define OOMLAB_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "run/result.h"

#define RESULTS_SCHEMA_VERSION 1

enum report_kind { REPORT_SCENARIO, REPORT_REPLAY, REPORT_FIT, REPORT_STRESS };

struct stress_result; /* stress/stress.h: a stress profile's figures and checks per job */

/* What `oomlab fit` found for one job (the job result is the run at the largest value). */
struct fit_row {
    int largest;    /* 0: even the smallest value does not fit */
    int probes;
    bool hit_limit; /* still fits at the search limit */
};

struct report_group {
    enum report_kind kind;
    const char *name;                 /* the scenario's name, or the replayed file */
    const char *title, *source, *file; /* a scenario's (NULL for a replay) */
    const struct job_result *jobs;
    size_t njobs;
    /* fit only: a row per job, the parameter searched and the margin kept free */
    const struct fit_row *fits;
    const char *fit_param;
    bool fit_smallest;                /* fit: the smallest value that fits (world_size), not the largest */
    double fit_margin;
    const char *capacity_text;        /* fit: the --capacity it ran under, or NULL */
    const struct stress_result *stress; /* stress only: a result per job (report/stress_out.c) */
};

void report_table(FILE *f, const struct report_group *g);
/* Appends the group to a JSON array (the document's "groups"). */
void report_json_add(json_t *groups, const struct report_group *g);
/* The whole document: {"schema": "oomlab-results", "schema_version": N, "command": ..., "groups": [...]};
 * steals groups. */
json_t *report_json_document(const char *command, json_t *groups);
void report_csv_header(FILE *f);
void report_csv_rows(FILE *f, const struct report_group *g);
/* "ok N - ..." lines, numbering from *counter; returns the number of failures. */
int report_tap(FILE *f, const struct report_group *g, int *counter);
/* Whether a job failed what it was asked: its expect: (run), fitting at all (fit), running without an
 * OOM (replay), or a check of its stress profile (stress). */
bool report_job_failed(const struct report_group *g, size_t i);

#endif
