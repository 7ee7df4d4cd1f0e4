/* cli_common.h: what every command shares: the report options (--json, --csv, --tap) with their help
 * text, and the one mapping from an outcome to an exit code:
 *   0 ok; 1 a job failed what it was asked (an expect:, fitting at all, a replay without OOM);
 *   2 bad input or usage; 3 internal or device error. */
#ifndef OOMLAB_CLI_COMMON_H
#define OOMLAB_CLI_COMMON_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "report/outputs.h"
#include "util/err.h"

/* getopt_long rows for the report options; their vals are CLI_OPT_JSON, CLI_OPT_CSV, CLI_OPT_TAP. */
enum { CLI_OPT_JSON = 0x1001, CLI_OPT_CSV, CLI_OPT_TAP };
#define CLI_REPORT_OPTIONS \
    {"json", required_argument, 0, CLI_OPT_JSON}, {"csv", required_argument, 0, CLI_OPT_CSV}, \
    {"tap", no_argument, 0, CLI_OPT_TAP}
#define CLI_REPORT_HELP \
    "  --json FILE      results as JSON (schema oomlab-results, memory_stats key names), '-' for stdout\n" \
    "  --csv FILE       one row per job, '-' for stdout\n" \
    "  --tap            one TAP line per job instead of the tables\n"

/* getopt_long rows for choosing a GPU with --device cuda:auto (device/gpu_select.h). */
enum { CLI_OPT_MIN_FREE = 0x1010, CLI_OPT_WAIT_FOR_GPU, CLI_OPT_POLL };
#define CLI_GPU_OPTIONS \
    {"min-free", required_argument, 0, CLI_OPT_MIN_FREE}, {"wait-for-gpu", required_argument, 0, CLI_OPT_WAIT_FOR_GPU}, \
    {"poll", required_argument, 0, CLI_OPT_POLL}
#define CLI_GPU_HELP \
    "  --min-free SIZE  cuda:auto takes only a GPU with at least SIZE free (NVML)\n" \
    "  --wait-for-gpu DURATION  cuda:auto waits up to DURATION (30s, 10m, 2h) for such a GPU\n" \
    "  --poll DURATION  how often it looks while waiting (default 5s)\n"

/* Takes a GPU-choice option: 1 if c was one, 0 if not, -1 with e for a bad value. */
int cli_gpu_option(int c, const char *arg, struct err *e);

struct cli_report_args {
    const char *json, *csv;
    bool tap;
};

/* Takes a report option; true if c was one. */
bool cli_report_option(int c, const char *arg, struct cli_report_args *a);

/* A count given to option `name`: decimal digits only, 1 to 2^62. 0, or -1 with e (ERR_INPUT). */
int cli_count_option(const char *name, const char *arg, uint64_t *out, struct err *e);

/* Runs every variant of every scenario in path (a file or a directory) and reports each scenario to out. */
struct harness_options;
int cli_run_scenarios(const char *path, const struct harness_options *opt, struct report_outputs *out, struct err *e);

/* The one-variant scenario of `--hf-config path` (cli_hf_config.c), its parameter count and warnings
 * written to info. Free with scenario_free. */
struct scenario;
int cli_hf_scenario(const char *path, struct scenario *sc, FILE *info, struct err *e);

/* Prints "oomlab CMD: message" and returns the exit code for e (2 or 3). */
int cli_fail(const char *command, const struct err *e);
/* The exit code of a finished command: 0, or 1 when a job failed. */
int cli_exit_status(const struct report_outputs *o);

#endif
