/* program_text.h: the op program as readable text (`oomlab program`), one op per line, so a change to
 * the generator shows up as a diff. */
#ifndef OOMLAB_PROGRAM_TEXT_H
#define OOMLAB_PROGRAM_TEXT_H

#include <stdio.h>

#include "program/program.h"

void op_print(FILE *f, const struct op *op);

/* A sink that prints every op to f. */
struct text_sink {
    struct op_sink sink;
    FILE *f;
};
void text_sink_init(struct text_sink *s, FILE *f);

#endif
