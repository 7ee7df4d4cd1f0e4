/* scenario.h: loading scenario YAML files into the jobs to run and what each run must show.
 *
 * A scenario names the failure it reproduces and where it was reported, the device and allocator
 * settings, the model and the training job, the faults switched on, and the variants to compare:
 * `before` runs the faults as written; each `after` / `after-NAME` variant keeps the faults (all, or
 * the ones it lists) and adds named fixes. Every variant carries an expectation. The keys are
 * listed in docs/scenario-keys.md, printed by scenario_keys_print_markdown() from the same tables
 * the loader uses. Errors are ERR_INPUT with "path:line:col: message" (1-based). */
#ifndef OOMLAB_SCENARIO_H
#define OOMLAB_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc/config.h"
#include "util/err.h"
#include "workload/spec.h"

/* What a variant's run must show; the runner compares it with the result (exit 1 on a miss). */
struct expectation {
    bool oom;                    /* true: the run must end in an OOM; false: it must fit */
    uint64_t peak_reserved_max;  /* bytes; 0 = no upper bound */
    uint64_t peak_reserved_min;  /* bytes; 0 = no lower bound */
    char oom_phase[32];          /* the phase the OOM must happen in ("load", "forward", ...); "" = any */
};

struct variant {
    char name[64];               /* "before", "after", "after-checkpointing", ... */
    struct job_spec job;         /* the base job with the faults it keeps and its fixes, validated */
    /* Its allocator settings, parsed once at load: the scenario's alloc_conf (or the variant's own),
     * edited by its allocator fixes. alloc.text is their PYTORCH_CUDA_ALLOC_CONF form, for reports. */
    struct alloc_config alloc;
    struct expectation expect;
};

struct scenario {
    char path[512];              /* the file it was loaded from */
    char name[128];              /* short slug: "flan-t5-xl-duplicate-conversion" */
    char title[256];             /* one line saying what fails */
    char source[512];            /* where the failure was reported */
    char device[64];             /* "sim:rtx5090" (default), "sim:a100-80", "sim:24GiB", "host", "cuda" */
    struct alloc_config alloc;   /* alloc_conf as written, parsed (text "": PyTorch's defaults) */
    struct variant *variants;    /* in file order */
    size_t nvariants;
};

/* Loads one scenario file. On failure returns -1 with e set and `out` needing no free. */
int scenario_load(const char *path, struct scenario *out, struct err *e);

/* A value set on a scenario from outside (`oomlab sweep --set job.batch_size=8`): the key's dotted path
 * and the value as it would be written in the file (a plain YAML scalar). */
struct scenario_override {
    const char *key, *value;
};
/* scenario_load with each override written into the file's YAML first (overrides.c), so the value is
 * checked as the file's own would be. An override's error names it: "--set KEY=VALUE: ...". */
int scenario_load_with(const char *path, const struct scenario_override *ov, size_t nov, struct scenario *out,
                       struct err *e);
void scenario_free(struct scenario *s);

/* A file, or every *.yaml in a directory in name order. *out is an array of *n scenarios, released
 * with scenario_free_all. On failure nothing is returned and nothing needs freeing. */
int scenario_load_dir_or_file(const char *path, struct scenario **out, size_t *n, struct err *e);
void scenario_free_all(struct scenario *s, size_t n);
/* The *.yaml names of a directory (not hidden ones), sorted; *names is an array of *n strings to free.
 * None is an error (ERR_INPUT). */
int scenario_list_yaml_files(const char *dir, char ***names, size_t *n, struct err *e);

/* The reference of every scenario key, fault and fix as Markdown (docs/scenario-keys.md). */
void scenario_keys_print_markdown(FILE *f);

#endif
