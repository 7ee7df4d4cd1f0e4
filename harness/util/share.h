/* share.h: a share as every option takes it: a fraction ("0.05") or a percentage ("5%"), the same
 * amount either way. A bare number above 1 is refused rather than guessed at. */
#ifndef OOMLAB_SHARE_H
#define OOMLAB_SHARE_H

#include "util/err.h"

/* Parses s into *out in [0, 1]; ERR_INPUT naming s otherwise. */
int share_parse(const char *s, double *out, struct err *e);

#endif
