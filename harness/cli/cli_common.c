/* cli_common.c: report options and exit codes shared by the commands (see cli_common.h). */
#include "cli/cli_common.h"

#include <stdio.h>

bool cli_report_option(int c, const char *arg, struct cli_report_args *a)
{
    switch (c) {
    case CLI_OPT_JSON: a->json = arg; return true;
    case CLI_OPT_CSV: a->csv = arg; return true;
    case CLI_OPT_TAP: a->tap = true; return true;
    default: return false;
    }
}

int cli_count_option(const char *name, const char *arg, uint64_t *out, struct err *e)
{
    uint64_t v = 0;
    const char *p = arg;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > ((1ULL << 62) - (uint64_t)(*p - '0')) / 10)
            return err_set(e, ERR_INPUT, "%s %s: larger than 2^62", name, arg);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (p == arg || *p || v == 0)
        return err_set(e, ERR_INPUT, "%s '%s': a whole number from 1, in decimal digits", name, arg);
    *out = v;
    return 0;
}

int cli_fail(const char *command, const struct err *e)
{
    fprintf(stderr, "oomlab %s: %s\n", command, e->msg);
    return e->code == ERR_INPUT ? 2 : 3;
}

int cli_exit_status(const struct report_outputs *o)
{
    return o->failures ? 1 : 0;
}
