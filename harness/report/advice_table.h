/* advice_table.h: `oomlab advise`'s ranking as a table: each candidate's fixes (or allocator settings),
 * whether it fits, its peak reserved and modelled throughput against the base, and the fixes that change
 * nothing, with why. */
#ifndef OOMLAB_ADVICE_TABLE_H
#define OOMLAB_ADVICE_TABLE_H

#include <stdio.h>

#include "run/advise.h"

void report_advice(FILE *f, const char *name, const char *title, const struct advice *a);

#endif
