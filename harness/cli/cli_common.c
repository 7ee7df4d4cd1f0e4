/* cli_common.c: report options and exit codes shared by the commands (see cli_common.h). */
#include "cli/cli_common.h"

#include <stdio.h>
#include <stdlib.h>

#include "device/gpu_select.h"
#include "run/harness.h"
#include "util/duration.h"
#include "util/size.h"

bool cli_report_option(int c, const char *arg, struct cli_report_args *a)
{
    switch (c) {
    case CLI_OPT_JSON: a->json = arg; return true;
    case CLI_OPT_CSV: a->csv = arg; return true;
    case CLI_OPT_TAP: a->tap = true; return true;
    default: return false;
    }
}

int cli_gpu_option(int c, const char *arg, struct err *e)
{
    static struct gpu_select_options o;
    int rc = 0;
    switch (c) {
    case CLI_OPT_MIN_FREE: rc = size_parse(arg, &o.min_free, e) ? err_prefix(e, "--min-free: ") : 0; break;
    case CLI_OPT_WAIT_FOR_GPU: rc = duration_parse(arg, &o.wait_seconds, e) ? err_prefix(e, "--wait-for-gpu: ") : 0; break;
    case CLI_OPT_POLL:
        rc = duration_parse(arg, &o.poll_seconds, e) ? err_prefix(e, "--poll: ")
             : o.poll_seconds > 0   ? 0
                                    : err_set(e, ERR_INPUT, "--poll: '%s' is no time at all", arg);
        break;
    default: return 0;
    }
    if (rc)
        return -1;
    gpu_select_configure(&o);
    return 1;
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

int cli_run_scenario(const struct scenario *sc, const struct harness_options *opt, struct report_outputs *out,
                     struct err *e)
{
    struct job_result *r;
    if (harness_run_scenario(sc, opt, &r, e))
        return -1;
    struct report_group g = {.kind = REPORT_SCENARIO, .name = sc->name, .title = sc->title, .source = sc->source,
                             .file = sc->path, .jobs = r, .njobs = sc->nvariants};
    report_outputs_add(out, &g);
    free(r);
    return 0;
}

int cli_run_scenarios(const char *path, const struct harness_options *opt, struct report_outputs *out, struct err *e)
{
    struct scenario *sc;
    size_t n;
    if (scenario_load_dir_or_file(path, &sc, &n, e))
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = cli_run_scenario(&sc[i], opt, out, e);
    scenario_free_all(sc, n);
    return rc;
}
