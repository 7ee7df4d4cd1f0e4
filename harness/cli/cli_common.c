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

int cli_fail(const char *command, const struct err *e)
{
    fprintf(stderr, "oomlab %s: %s\n", command, e->msg);
    return e->code == ERR_INPUT ? 2 : 3;
}

int cli_exit_status(const struct report_outputs *o)
{
    return o->failures ? 1 : 0;
}
