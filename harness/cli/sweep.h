/* sweep.h: what `oomlab sweep` and `oomlab merge` share. A sweep is a directory:
 *   DIR/tasks.json          the manifest (schema oomlab-sweep): the working directory the sweep was made in,
 *                           its run options, and one task per scenario x device x combination of --set values
 *   DIR/results/task-N.json task N's results document (the writer of `oomlab run`, command "sweep"), or
 *   DIR/results/task-N.error.json  why task N could not run ({"task", "exit", "error"})
 *   DIR/logs/task-N.log     what task N printed (its table, progress, errors)
 *   DIR/sweep.sbatch        with --slurm: a job array, one array task per sweep task
 * Every file is written whole or not at all (util/output.h). */
#ifndef OOMLAB_SWEEP_H
#define OOMLAB_SWEEP_H

#include <jansson.h>
#include <stddef.h>

#include "cli/cli_common.h"
#include "util/err.h"

#define SWEEP_SCHEMA_VERSION 1
#define SWEEP_MAX_TASKS 100000

/* One --set KEY=V1,V2: its values in order. */
struct sweep_param {
    char *key;
    char **values;
    size_t nvalues;
};

struct sweep_spec {
    char **inputs;              /* SCENARIO|DIR arguments */
    size_t ninputs;
    char **devices;             /* --device D1,D2 (none: each scenario's own) */
    size_t ndevices;
    struct sweep_param *params; /* --set, in the order given */
    size_t nparams;
    const char *capacity;       /* --capacity text, or NULL */
    unsigned long long max_forwards; /* --max-forwards, or 0 */
};

/* Splits "V1,V2" at commas ('\,' is a comma inside a value) into p->values. ERR_INPUT on an empty list. */
int sweep_param_parse(const char *arg, struct sweep_param *p, struct err *e);
void sweep_spec_free(struct sweep_spec *s);

/* Expands the spec into its tasks (each scenario loaded with its values, so a bad key or value fails here,
 * ERR_INPUT naming it) and returns the manifest document; *ntasks receives their count. */
json_t *sweep_expand(const struct sweep_spec *s, size_t *ntasks, struct err *e);
/* Makes DIR, DIR/results and DIR/logs, refusing a DIR that already holds a sweep, and writes the manifest. */
int sweep_write(const char *dir, json_t *manifest, struct err *e);
/* Reads DIR/tasks.json; *ntasks receives the number of tasks. NULL with e set. */
json_t *sweep_read(const char *dir, size_t *ntasks, struct err *e);
/* The manifest's task n (0-based), its name through *name. */
const json_t *sweep_task(const json_t *manifest, size_t n, const char **name);

/* DIR/results/task-N.json, DIR/results/task-N.error.json, DIR/logs/task-N.log. -1 if too long. */
int sweep_path(char *buf, size_t len, const char *dir, const char *what, size_t n);

/* `oomlab sweep --task N DIR`: runs task n and writes its results document; on an error, the error file.
 * Returns 0 when the results were written (expectations that fail are results, judged by merge), else
 * the exit code of the error (2 or 3). */
int sweep_run_task(const char *dir, size_t n);

/* `oomlab merge DIR`: every task's results through the writers of `oomlab run`; the exit code (0, 1 when
 * an expectation failed, 2 or 3 when a task's results are missing or it failed: each is named). */
int sweep_merge(const char *dir, const struct cli_report_args *ra);

#endif
