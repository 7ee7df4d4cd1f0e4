/* program.c: names of op-program categories. */
#include "program/program.h"

#include <string.h>

static const char *const category_names[CAT_COUNT] = {
    "param", "grad", "optimizer_state", "ema", "activation", "temp", "workspace", "input", "output", "other",
};

const char *category_name(enum category c)
{
    return (unsigned)c < CAT_COUNT ? category_names[c] : "?";
}

int category_from_name(const char *s)
{
    for (int i = 0; i < CAT_COUNT; i++)
        if (strcmp(s, category_names[i]) == 0)
            return i;
    return -1;
}
