/* switches.h: shared parsing of fault/fix parameters from text (internal to faults.c and fixes.c). */
#ifndef OOMLAB_WORKLOAD_SWITCHES_H
#define OOMLAB_WORKLOAD_SWITCHES_H

#include "workload/spec.h"

/* Finds `name` in table; NULL if absent. */
const struct switch_info *switch_find(const struct switch_info *table, int n, const char *name);
/* Parses `value` into the field `param` of `base` (struct fault_params or struct fix_params). */
int switch_param_set(const struct switch_info *sw, void *base, const char *param, const char *value, struct err *e);

#endif
