/* dir.h: making an output directory. */
#ifndef OOMLAB_DIR_H
#define OOMLAB_DIR_H

#include "util/err.h"

/* Makes dir (one level) unless it exists as a directory; ERR_INPUT naming it and the reason. */
int dir_make(const char *dir, struct err *e);

#endif
