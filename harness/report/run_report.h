/* run_report.h: reports of `oomlab run`: one table per scenario, JSON (memory_stats key names kept), CSV
 * (one row per variant) and TAP (one line per expectation). Every figure says whether it is measured or
 * modelled. */
#ifndef OOMLAB_RUN_REPORT_H
#define OOMLAB_RUN_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "run/harness.h"

void report_table(FILE *f, const struct scenario *sc, const struct variant_result *r, size_t n);
/* Appends one scenario's results to a JSON array. */
void report_json_add(json_t *scenarios, const struct scenario *sc, const struct variant_result *r, size_t n);
void report_csv_header(FILE *f);
void report_csv_rows(FILE *f, const struct variant_result *r, size_t n);
/* Prints "ok N - scenario/variant: ..." lines, numbering from *counter; returns failures. */
int report_tap(FILE *f, const struct variant_result *r, size_t n, int *counter);

/* "OOM in backward, step 2 (decoder.block.3.ffn)" or "fits" */
void report_outcome(const struct variant_result *r, char *buf, size_t len);

#endif
