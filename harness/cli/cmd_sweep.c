/* cmd_sweep.c: `oomlab sweep`: scenarios x devices x --set values as tasks in a directory, run here in
 * parallel (each task a process of this same binary: `oomlab sweep --task N DIR`) and merged, or written
 * as a Slurm job array and submitted with sbatch (see sweep.h for the directory). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/sweep.h"
#include "util/output.h"

void cmd_sweep_usage(FILE *f)
{
    fprintf(f,
            "usage: oomlab sweep [options] --out DIR SCENARIO.yaml|DIR...\n"
            "       oomlab sweep --task N DIR          (runs one task: what -j and Slurm's array tasks run)\n"
            "  one task per scenario x device x combination of --set values, each running every variant;\n"
            "  run here (-j) and merged into one table, or as a Slurm job array (--slurm); see oomlab merge\n"
            "options:\n"
            "  --out DIR        the sweep's directory: DIR/tasks.json, DIR/results/task-N.json, DIR/logs\n"
            "  --device D1,D2   run every task on each device (sim:PROFILE, host, cuda, ...; default: each\n"
            "                   scenario's own)\n"
            "  --set KEY=V1,V2  a scenario key by its dotted path (job.batch_size=4,8; model.layers=12,24;\n"
            "                   alloc_conf=...), checked as in the file; repeat for more keys (every\n"
            "                   combination runs); '\\,' is a comma inside a value\n"
            "  --capacity CAP   override every device's capacity (24GiB, 0.5, 50%%)\n"
            "  --max-forwards N run jobs of up to N forward passes (default 100000)\n"
            "  -j N             run N tasks at once here (default: the CPUs online); with --slurm, at most N\n"
            "                   array tasks at once (--array=0-M%%N)\n"
            "  --slurm          write DIR/sweep.sbatch (a job array, one array task per task) instead of\n"
            "                   running here\n"
            "  --sbatch OPT     one more '#SBATCH OPT' line (--partition=gpu, --gres=gpu:1, ...); repeatable\n"
            "  --submit         submit it with sbatch (implies --slurm); then run oomlab merge DIR\n"
            "  --wait           sbatch --wait, then merge as oomlab merge does (implies --submit)\n" CLI_REPORT_HELP
            "exit: 0 every expectation holds, 1 one failed, 2 bad input or a task missing, 3 internal error\n");
}

enum { OPT_OUT = 0x2001, OPT_SET, OPT_TASK, OPT_SLURM, OPT_SBATCH, OPT_SUBMIT, OPT_WAIT };

const struct option cmd_sweep_options[] = {
    {"out", required_argument, 0, OPT_OUT},         {"device", required_argument, 0, 'd'},
    {"set", required_argument, 0, OPT_SET},         {"capacity", required_argument, 0, 'c'},
    {"max-forwards", required_argument, 0, 'F'},    {"task", required_argument, 0, OPT_TASK},
    {"slurm", no_argument, 0, OPT_SLURM},           {"sbatch", required_argument, 0, OPT_SBATCH},
    {"submit", no_argument, 0, OPT_SUBMIT},         {"wait", no_argument, 0, OPT_WAIT},
    {"help", no_argument, 0, 'h'},                  CLI_REPORT_OPTIONS,
    {0, 0, 0, 0},
};

struct sweep_cli {
    struct sweep_spec spec;
    struct cli_report_args ra;
    const char *out;
    uint64_t jobs, task;
    bool has_task, slurm, submit, wait;
    const char **sbatch;
    size_t nsbatch;
};

static int push(void *arr, size_t *n, size_t size, const void *item, struct err *e)
{
    void **a = arr;
    void *grown = realloc(*a, (*n + 1) * size);
    if (!grown)
        return err_set(e, ERR_INTERNAL, "out of host memory");
    memcpy((char *)grown + *n * size, item, size);
    *a = grown;
    (*n)++;
    return 0;
}

static int split_devices(char *arg, struct sweep_spec *s, struct err *e)
{
    for (char *save, *d = strtok_r(arg, ",", &save); d; d = strtok_r(NULL, ",", &save))
        if (push(&s->devices, &s->ndevices, sizeof *s->devices, &d, e))
            return -1;
    return s->ndevices ? 0 : err_set(e, ERR_INPUT, "--device: no device named");
}

/* 0; 1 after --help; 2 after an unknown option (the usage printed); -1 with e. */
static int parse_args(int argc, char **argv, struct sweep_cli *c, struct err *e)
{
    int o;
    uint64_t count;
    optind = 1;
    while ((o = getopt_long(argc, argv, "hj:", cmd_sweep_options, NULL)) != -1) {
        if (cli_report_option(o, optarg, &c->ra))
            continue;
        struct sweep_param p = {0};
        switch (o) {
        case OPT_OUT: c->out = optarg; break;
        case 'd':
            if (split_devices(optarg, &c->spec, e))
                return -1;
            break;
        case OPT_SET:
            if (sweep_param_parse(optarg, &p, e) || push(&c->spec.params, &c->spec.nparams, sizeof p, &p, e)) {
                free(p.key), free(p.values ? p.values[0] : NULL), free(p.values);
                return -1;
            }
            break;
        case 'c': c->spec.capacity = optarg; break;
        case 'F':
            if (cli_count_option("--max-forwards", optarg, &count, e))
                return -1;
            c->spec.max_forwards = count;
            break;
        case 'j':
            if (cli_count_option("-j", optarg, &c->jobs, e))
                return -1;
            break;
        case OPT_TASK:
            if (strspn(optarg, "0123456789") != strlen(optarg) || !*optarg || strlen(optarg) > 9)
                return err_set(e, ERR_INPUT, "--task '%s': a task number, from 0", optarg);
            c->task = strtoull(optarg, NULL, 10), c->has_task = true;
            break;
        case OPT_SBATCH:
            if (push(&c->sbatch, &c->nsbatch, sizeof *c->sbatch, &optarg, e))
                return -1;
            break;
        case OPT_WAIT: c->wait = true; /* fall through */
        case OPT_SUBMIT: c->submit = true; /* fall through */
        case OPT_SLURM: c->slurm = true; break;
        case 'h': cmd_sweep_usage(stdout); return 1;
        default: cmd_sweep_usage(stderr); return 2;
        }
    }
    c->spec.inputs = argv + optind;
    c->spec.ninputs = (size_t)(argc - optind);
    if (c->has_task)
        return c->spec.ninputs == 1 ? 0 : err_set(e, ERR_INPUT, "--task N takes the sweep's directory alone");
    if (!c->out)
        return err_set(e, ERR_INPUT, "--out DIR is required: the directory of the sweep's tasks and results");
    if (!c->spec.ninputs)
        return err_set(e, ERR_INPUT, "expected at least one scenario file or directory");
    if (c->nsbatch && !c->slurm)
        return err_set(e, ERR_INPUT, "--sbatch goes with --slurm");
    return 0;
}

/* This binary's own path, for the processes and the array tasks that run tasks. */
static int self_path(char *buf, size_t len, struct err *e)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n < 0)
        return err_set(e, ERR_INTERNAL, "cannot find this program (/proc/self/exe): %s", strerror(errno));
    buf[n] = '\0';
    return 0;
}

/* Starts `oomlab sweep --task n dir`, its output to the task's log. */
static pid_t start_task(const char *self, const char *dir, size_t n, struct err *e)
{
    char log[PATH_MAX + 64], num[24];
    sweep_path(log, sizeof log, dir, "log", n);
    snprintf(num, sizeof num, "%zu", n);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return err_set(e, ERR_INTERNAL, "cannot start task %zu: %s", n, strerror(errno));
    if (pid == 0) {
        if (!freopen(log, "w", stdout) || dup2(1, 2) < 0) /* (fcntl.h's struct stat clashes with ours) */
            _exit(3);
        execl(self, "oomlab", "sweep", "--task", num, dir, (char *)NULL);
        dprintf(2, "oomlab sweep: cannot run %s: %s\n", self, strerror(errno));
        _exit(3);
    }
    return pid;
}

/* Runs every task here, at most jobs at once; a task that fails is named (merge says it again). */
static int run_local(const char *dir, size_t ntasks, uint64_t jobs, struct err *e)
{
    char self[PATH_MAX];
    if (self_path(self, sizeof self, e))
        return -1;
    pid_t *pids = calloc(ntasks ? ntasks : 1, sizeof *pids);
    if (!pids)
        return err_set(e, ERR_INTERNAL, "out of host memory");
    size_t next = 0, running = 0;
    int rc = 0;
    while (next < ntasks || running) {
        if (rc == 0 && next < ntasks && running < jobs) {
            if ((pids[next] = start_task(self, dir, next, e)) < 0)
                rc = -1;
            else
                next++, running++;
            continue;
        }
        int status;
        pid_t pid = wait(&status);
        if (pid < 0)
            break;
        for (size_t i = 0; i < next; i++) {
            if (pids[i] != pid)
                continue;
            running--;
            if (!WIFEXITED(status) || WEXITSTATUS(status))
                fprintf(stderr, "oomlab sweep: task %zu failed (%s %d); its log: %s/logs/task-%zu.log\n", i,
                        WIFEXITED(status) ? "exit" : "signal",
                        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), dir, i);
        }
    }
    free(pids);
    return rc;
}

/* 'text' for a shell, single-quoted. */
static void shell_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++)
        *s == '\'' ? fputs("'\\''", f) : fputc(*s, f);
    fputc('\'', f);
}

static int write_sbatch(const struct sweep_cli *c, const char *dir, size_t ntasks, char *path, size_t len,
                        struct err *e)
{
    char self[PATH_MAX];
    if (self_path(self, sizeof self, e))
        return -1;
    if (snprintf(path, len, "%s/sweep.sbatch", dir) >= (int)len)
        return err_set(e, ERR_INPUT, "%s: path too long", dir);
    for (size_t i = 0; i < c->nsbatch; i++)
        if (strchr(c->sbatch[i], '\n'))
            return err_set(e, ERR_INPUT, "--sbatch: one option per line, no newline");
    struct output o;
    if (output_open(&o, path, e))
        return -1;
    fprintf(o.f, "#!/bin/sh\n# oomlab sweep: one array task per sweep task; then: oomlab merge %s\n", dir);
    fprintf(o.f, "#SBATCH --job-name=oomlab-sweep\n#SBATCH --array=0-%zu", ntasks - 1);
    if (c->jobs)
        fprintf(o.f, "%%%llu", (unsigned long long)c->jobs);
    fprintf(o.f, "\n#SBATCH --output=%s/logs/task-%%a.log\n#SBATCH --ntasks=1\n", dir);
    for (size_t i = 0; i < c->nsbatch; i++)
        fprintf(o.f, "#SBATCH %s\n", c->sbatch[i]);
    fputs("exec ", o.f);
    shell_quote(o.f, self);
    fputs(" sweep --task \"$SLURM_ARRAY_TASK_ID\" ", o.f);
    shell_quote(o.f, dir);
    fputc('\n', o.f);
    return output_commit(&o, e);
}

/* sbatch [--wait] --parsable SCRIPT; what it prints (the job id) goes to standard error, so standard
 * output carries the merged report alone. */
static int submit(const char *script, bool wait_for_it, struct err *e)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return err_set(e, ERR_INTERNAL, "cannot run sbatch: %s", strerror(errno));
    if (pid == 0) {
        dup2(2, 1);
        if (wait_for_it)
            execlp("sbatch", "sbatch", "--wait", "--parsable", script, (char *)NULL);
        else
            execlp("sbatch", "sbatch", "--parsable", script, (char *)NULL);
        dprintf(2, "oomlab sweep: cannot run sbatch: %s\n", strerror(errno));
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0)
        return err_set(e, ERR_INTERNAL, "waiting for sbatch: %s", strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return err_set(e, ERR_INPUT, "sbatch was not found or could not run (is Slurm's client installed?)");
    if (!WIFEXITED(status) || WEXITSTATUS(status)) /* with --wait: an array task failed; merge names it */
        fprintf(stderr, "oomlab sweep: sbatch %s %d\n", WIFEXITED(status) ? "exited" : "was killed by signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return WIFEXITED(status) && (WEXITSTATUS(status) == 0 || wait_for_it)
               ? 0
               : err_set(e, ERR_INPUT, "sbatch did not take %s", script);
}

static int sweep(struct sweep_cli *c, struct err *e)
{
    size_t ntasks = 0;
    json_t *m = sweep_expand(&c->spec, &ntasks, e);
    if (!m)
        return -1;
    int rc = ntasks ? sweep_write(c->out, m, e) : err_set(e, ERR_INPUT, "the sweep has no tasks");
    json_decref(m);
    char dir[PATH_MAX], script[PATH_MAX + 32];
    if (rc == 0 && !realpath(c->out, dir))
        rc = err_set(e, ERR_INTERNAL, "%s: %s", c->out, strerror(errno));
    if (rc)
        return -1;
    fprintf(stderr, "oomlab sweep: %zu tasks in %s\n", ntasks, dir);
    if (!c->slurm) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        return run_local(dir, ntasks, c->jobs ? c->jobs : (uint64_t)(cpus > 0 ? cpus : 1), e) ? -1
                                                                                            : sweep_merge(dir, &c->ra);
    }
    if (write_sbatch(c, dir, ntasks, script, sizeof script, e))
        return -1;
    if (!c->submit) {
        fprintf(stderr, "oomlab sweep: wrote %s; submit it with sbatch %s, then run oomlab merge %s\n", script,
                script, dir);
        return 0;
    }
    if (submit(script, c->wait, e))
        return -1;
    if (!c->wait) {
        fprintf(stderr, "oomlab sweep: submitted %s; when its tasks are done, run oomlab merge %s\n", script, dir);
        return 0;
    }
    return sweep_merge(dir, &c->ra);
}

int cmd_sweep(int argc, char **argv)
{
    struct sweep_cli c = {0};
    struct err e = {0};
    int rc = parse_args(argc, argv, &c, &e);
    if (rc == 0)
        rc = c.has_task ? sweep_run_task(c.spec.inputs[0], c.task) : sweep(&c, &e);
    else if (rc == 1)
        rc = 0;
    sweep_spec_free(&c.spec);
    free(c.sbatch);
    return rc < 0 ? cli_fail("sweep", &e) : rc;
}
