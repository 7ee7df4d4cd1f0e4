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

/* Runs every variant of every scenario in path (a file or a directory) and reports each scenario to out;
 * cli_run_scenario: of one loaded scenario. */
struct harness_options;
struct scenario;
int cli_run_scenario(const struct scenario *sc, const struct harness_options *opt, struct report_outputs *out,
                     struct err *e);
int cli_run_scenarios(const char *path, const struct harness_options *opt, struct report_outputs *out, struct err *e);

/* `--hf-config FILE` and the job options beside it (cli_hf_config.c), for fit and run. */
enum {
    CLI_OPT_HF_CONFIG = 0x1101, CLI_OPT_BATCH, CLI_OPT_SEQ, CLI_OPT_PRECISION, CLI_OPT_OPTIMIZER, CLI_OPT_TRAINABLE
};
#define CLI_HF_OPTIONS \
    {"hf-config", required_argument, 0, CLI_OPT_HF_CONFIG}, {"batch-size", required_argument, 0, CLI_OPT_BATCH}, \
    {"seq-len", required_argument, 0, CLI_OPT_SEQ}, {"precision", required_argument, 0, CLI_OPT_PRECISION}, \
    {"optimizer", required_argument, 0, CLI_OPT_OPTIMIZER}, {"trainable", required_argument, 0, CLI_OPT_TRAINABLE}
#define CLI_HF_HELP \
    "  --hf-config FILE the model of a Hugging Face config.json instead of a scenario (llama, mistral,\n" \
    "                   qwen2, qwen3, phi3, gemma, gemma2, gemma3_text, gpt_neox, gpt2, bert, roberta,\n" \
    "                   t5, mixtral); prints its parameter count and the assumptions made. With it:\n" \
    "  --batch-size N   samples per step (default 8)\n" \
    "  --seq-len N      tokens per sample (default 128)\n" \
    "  --precision P    fp32, bf16, fp16 (pure), bf16-mixed, fp16-mixed (autocast over fp32 weights);\n" \
    "                   default: the config's torch_dtype, pure (fp32 without one)\n" \
    "  --optimizer O    sgd, adamw (default), adamw_8bit, adafactor\n" \
    "  --trainable T    full (default), lora, linear_probe\n"

struct cli_hf_args {
    const char *config; /* NULL: no --hf-config */
    const char *batch, *seq_len, *precision, *optimizer, *trainable;
};
/* Takes an --hf-config option; true if c was one. */
bool cli_hf_option(int c, const char *arg, struct cli_hf_args *a);
/* A job option given without --hf-config: -1 and e (ERR_INPUT) naming it. */
int cli_hf_only(const struct cli_hf_args *a, struct err *e);
/* The one-variant scenario of `--hf-config` and its job options; its parameter count, job and
 * assumptions written to info, warnings to stderr. Free with scenario_free. */
int cli_hf_scenario(const struct cli_hf_args *a, struct scenario *sc, FILE *info, struct err *e);

/* Prints "oomlab CMD: message" and returns the exit code for e (2 or 3). */
int cli_fail(const char *command, const struct err *e);
/* The exit code of a finished command: 0, or 1 when a job failed. */
int cli_exit_status(const struct report_outputs *o);

#endif
