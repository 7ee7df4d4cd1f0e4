/* robust_out.h: a job's OOM-robust run (job.robust) in the table and the results document: each attempt
 * with its batch, device and where it ran out of memory, the work thrown away, and where it settled beside
 * what `oomlab fit` finds up front. */
#ifndef OOMLAB_ROBUST_OUT_H
#define OOMLAB_ROBUST_OUT_H

#include <jansson.h>
#include <stdio.h>

#include "run/result.h"

void robust_print(FILE *f, const struct job_result *r);
json_t *robust_json(const struct robust_result *rb); /* null when the job had no policy */

#endif
