/* outputs.h: where a command's report goes: the table on standard output (unless standard output
 * carries the JSON, CSV or TAP instead), --json FILE, --csv FILE and --tap, each written by the same
 * writers for run, fit and replay. Files are written whole or not at all. */
#ifndef OOMLAB_OUTPUTS_H
#define OOMLAB_OUTPUTS_H

#include <jansson.h>
#include <stdbool.h>

#include "report/report.h"
#include "util/output.h"
#include "util/err.h"

struct report_outputs {
    const char *command;          /* "run", "fit", "replay" */
    const char *json_path;        /* NULL, a path, or "-" */
    const char *csv_path;
    bool tap;
    bool table;                   /* the table goes to standard output */
    json_t *groups;               /* the JSON document's groups: with --json or report_outputs_keep_document */
    struct output csv;
    FILE *csv_f;
    int tap_count;
    int failures;                 /* jobs that failed what they were asked (report_job_failed) */
};

/* Checks the destinations (standard output taken once at most) and opens the CSV file. ERR_INPUT. */
int report_outputs_open(struct report_outputs *o, const char *command, const char *json_path, const char *csv_path,
                        bool tap, struct err *e);
void report_outputs_add(struct report_outputs *o, const struct report_group *g);
/* Keeps the results document even without --json, for report_outputs_document (without either, no
 * JSON is built). 0, or -1 with e set (ERR_INTERNAL). */
int report_outputs_keep_document(struct report_outputs *o, struct err *e);
/* The results document so far (a new reference), or NULL unless it is kept (--json or
 * report_outputs_keep_document). */
json_t *report_outputs_document(struct report_outputs *o);
/* Writes the JSON, commits the CSV, ends the TAP plan and checks that standard output took everything.
 * After an error (ok false) nothing is committed. */
int report_outputs_close(struct report_outputs *o, bool ok, struct err *e);

#endif
