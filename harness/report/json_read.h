/* json_read.h: a results document's scenario job read back into a job_result (oomlab merge), so the
 * same writers as `oomlab run` print it: what the writer in json_report.c emits, read back, is written
 * again byte for byte (tests/cli_sweep.sh checks JSON, table and CSV). */
#ifndef OOMLAB_JSON_READ_H
#define OOMLAB_JSON_READ_H

#include <jansson.h>

#include "run/result.h"
#include "util/err.h"

/* Fills *r from one element of a scenario group's "jobs". ERR_INPUT naming the key when a key the
 * writer emits is missing or of another type. */
int job_result_from_json(const json_t *job, struct job_result *r, struct err *e);

#endif
