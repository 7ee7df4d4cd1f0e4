/* atomic_file.h: result files written whole or not at all (a temporary file renamed into place). */
#ifndef OOMLAB_ATOMIC_FILE_H
#define OOMLAB_ATOMIC_FILE_H

#include <stdio.h>

#include "util/err.h"

struct atomic_file {
    FILE *f;
    char path[4096], tmp[4200];
};

int atomic_open(struct atomic_file *af, const char *path, struct err *e);
/* Flushes, closes and renames into place; on any failure the temporary is removed. */
int atomic_commit(struct atomic_file *af, struct err *e);
void atomic_abort(struct atomic_file *af);

#endif
