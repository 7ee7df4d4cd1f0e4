/* stress_out.h: a stress profile's results (stress/stress.h) in the table and the results document:
 * per allocator setting the kind's figures, the allocator over time, and every check with what it found;
 * each labelled modelled (sim) or measured (host, cuda). */
#ifndef OOMLAB_STRESS_OUT_H
#define OOMLAB_STRESS_OUT_H

#include <jansson.h>
#include <stdio.h>

#include "report/report.h"
#include "stress/stress.h"

void stress_table(FILE *f, const struct report_group *g);
json_t *stress_json(const struct stress_result *s);

#endif
