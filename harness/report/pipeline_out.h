/* pipeline_out.h: a pipeline-parallel job's stages in the table and the results document (a "pipeline"
 * object, present only for such a job), and read back by `oomlab merge`. */
#ifndef OOMLAB_PIPELINE_OUT_H
#define OOMLAB_PIPELINE_OUT_H

#include <jansson.h>
#include <stdio.h>

#include "run/result.h"

void pipeline_print(FILE *f, const struct job_result *r);
json_t *pipeline_json(const struct job_result *r);                     /* NULL: not pipeline-parallel */
int pipeline_read(const json_t *o, struct job_result *r, struct err *e); /* o NULL: not pipeline-parallel */

#endif
