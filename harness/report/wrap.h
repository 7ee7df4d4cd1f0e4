/* wrap.h: text folded at word boundaries to fit a 100-column terminal, for the tables' long lines (a
 * scenario's source, a breakdown, PyTorch's OOM message). */
#ifndef OOMLAB_WRAP_H
#define OOMLAB_WRAP_H

#include <stdio.h>

#define WRAP_WIDTH 100
#define WRAP_NBSP '\x01' /* printed as a space, never broken at: "2.95" WRAP_NBSP "GiB" stays on one line */

/* Replaces the spaces of s (a size such as "2.95 GiB") with WRAP_NBSP. */
void wrap_keep_together(char *s);

/* Prints first (the start of the first line, counted in the width) then text, folding at spaces so no
 * line passes WRAP_WIDTH; continuation lines start with `indent` spaces. A word longer than a line is
 * printed whole on its own line. Ends with a newline. */
void wrap_print(FILE *f, const char *first, int indent, const char *text);

#endif
