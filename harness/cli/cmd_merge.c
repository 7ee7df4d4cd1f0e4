/* cmd_merge.c: `oomlab merge DIR`: a sweep's task results (DIR/results/task-N.json) gathered into one
 * report by the writers of `oomlab run` (table, --json, --csv, --tap), in task order, so the output is the
 * same whether the tasks ran here or on Slurm. Nothing is written unless every task has its results. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/sweep.h"
#include "report/json_read.h"

void cmd_merge_usage(FILE *f)
{
    fprintf(f, "usage: oomlab merge [options] DIR\n"
               "  the results of every task of the sweep in DIR (oomlab sweep --out DIR) as one report, as\n"
               "  oomlab run prints it; a task without results is named, and nothing is written\n"
               "options:\n" CLI_REPORT_HELP
               "exit: 0 every expectation holds, 1 one failed, 2 bad input or a task without results,\n"
               "      3 a task met an internal or device error\n");
}

const struct option cmd_merge_options[] = {
    {"help", no_argument, 0, 'h'},
    CLI_REPORT_OPTIONS,
    {0, 0, 0, 0},
};

/* One task's results: its group (borrowed from doc) and its jobs read back. */
struct task_result {
    json_t *doc;
    const json_t *group;
    struct job_result *jobs;
    size_t njobs;
};

static int read_result(const char *path, struct task_result *t, struct err *e)
{
    json_error_t je;
    if (!(t->doc = json_load_file(path, 0, &je)))
        return err_set(e, ERR_INPUT, "%s: %s", path, je.text);
    const char *schema = json_string_value(json_object_get(t->doc, "schema"));
    const json_t *groups = json_object_get(t->doc, "groups");
    t->group = json_array_get(groups, 0);
    const char *kind = json_string_value(json_object_get(t->group, "kind"));
    const json_t *jobs = json_object_get(t->group, "jobs");
    if (!schema || strcmp(schema, "oomlab-results") || json_array_size(groups) != 1 || !kind ||
        strcmp(kind, "scenario") || !json_is_string(json_object_get(t->group, "name")) || !json_is_array(jobs))
        return err_set(e, ERR_INPUT, "%s: not a sweep task's results (one scenario group of oomlab-results)", path);
    t->njobs = json_array_size(jobs);
    if (!(t->jobs = calloc(t->njobs ? t->njobs : 1, sizeof *t->jobs)))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    for (size_t i = 0; i < t->njobs; i++)
        if (job_result_from_json(json_array_get(jobs, i), &t->jobs[i], e))
            return err_prefix(e, "%s: ", path);
    return 0;
}

/* Why task n has no results: its error file's message and exit code, or that it has not written any. */
static int missing(const char *dir, size_t n, const char *name)
{
    char path[PATH_MAX + 64];
    sweep_path(path, sizeof path, dir, "error", n);
    json_t *err = json_load_file(path, 0, NULL);
    const char *msg = json_string_value(json_object_get(err, "error"));
    int code = (int)json_integer_value(json_object_get(err, "exit"));
    if (msg)
        fprintf(stderr, "oomlab merge: task %zu (%s) failed: %s\n", n, name, msg);
    else {
        sweep_path(path, sizeof path, dir, "log", n);
        fprintf(stderr, "oomlab merge: task %zu (%s) has no results: not run yet, still running, or killed "
                        "(its log: %s)\n", n, name, path);
    }
    json_decref(err);
    return msg && code == 3 ? 3 : 2;
}

int sweep_merge(const char *dir, const struct cli_report_args *ra)
{
    struct err e = {0};
    size_t ntasks = 0, nmissing = 0;
    json_t *m = sweep_read(dir, &ntasks, &e);
    if (!m)
        return cli_fail("merge", &e);
    struct task_result *t = calloc(ntasks ? ntasks : 1, sizeof *t);
    int worst = 0;
    if (!t)
        err_set(&e, ERR_INTERNAL, "out of host memory");
    for (size_t i = 0; t && i < ntasks && !e.code; i++) {
        char path[PATH_MAX + 64];
        const char *name;
        sweep_task(m, i, &name);
        sweep_path(path, sizeof path, dir, "result", i);
        if (access(path, F_OK) == 0) {
            read_result(path, &t[i], &e);
            continue;
        }
        int code = missing(dir, i, name);
        worst = code > worst ? code : worst;
        nmissing++;
    }
    if (nmissing && !e.code)
        err_set(&e, worst == 3 ? ERR_INTERNAL : ERR_INPUT, "%zu of %zu tasks have no results; nothing merged",
                nmissing, ntasks);
    struct report_outputs out;
    int rc = e.code ? -1 : report_outputs_open(&out, "sweep", ra->json, ra->csv, ra->tap, &e);
    if (rc == 0) {
        for (size_t i = 0; i < ntasks; i++) {
            const json_t *g = t[i].group;
            struct report_group rg = {
                .kind = REPORT_SCENARIO, .name = json_string_value(json_object_get(g, "name")),
                .title = json_string_value(json_object_get(g, "title")),
                .source = json_string_value(json_object_get(g, "source")),
                .file = json_string_value(json_object_get(g, "file")), .jobs = t[i].jobs, .njobs = t[i].njobs};
            report_outputs_add(&out, &rg);
        }
        rc = report_outputs_close(&out, true, &e);
    }
    for (size_t i = 0; t && i < ntasks; i++) {
        free(t[i].jobs);
        json_decref(t[i].doc);
    }
    free(t);
    json_decref(m);
    return rc ? cli_fail("merge", &e) : cli_exit_status(&out);
}

int cmd_merge(int argc, char **argv)
{
    struct cli_report_args ra = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_merge_options, NULL)) != -1) {
        if (cli_report_option(c, optarg, &ra))
            continue;
        if (c == 'h') {
            cmd_merge_usage(stdout);
            return 0;
        }
        cmd_merge_usage(stderr);
        return 2;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "oomlab merge: expected one sweep directory\n");
        cmd_merge_usage(stderr);
        return 2;
    }
    return sweep_merge(argv[optind], &ra);
}
