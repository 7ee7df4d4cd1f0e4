/* duration.h: durations as options take them ("500ms", "30s", "10m", "2h", "1.5h"): a decimal number
 * in oomlab's number syntax (see size.h) and a unit, which is required (a bare "10" is refused: ten
 * what?). At most a week. */
#ifndef OOMLAB_DURATION_H
#define OOMLAB_DURATION_H

#include "util/err.h"

/* 0 with *seconds set, or -1 with e (ERR_INPUT) quoting the text and what was wrong. */
int duration_parse(const char *s, double *seconds, struct err *e);

#endif
