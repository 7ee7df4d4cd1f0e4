/* sweep_tasks.c: a sweep's tasks: expanding scenarios x devices x --set values, the manifest
 * DIR/tasks.json, and running one task into DIR/results (see sweep.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/sweep.h"
#include "device/device_kind.h"
#include "report/json_out.h"
#include "run/harness.h"
#include "util/dir.h"
#include "util/size.h"

int sweep_param_parse(const char *arg, struct sweep_param *p, struct err *e)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return err_set(e, ERR_INPUT, "--set '%s': expected KEY=VALUE[,VALUE...]", arg);
    *p = (struct sweep_param){.key = strndup(arg, (size_t)(eq - arg))};
    size_t len = strlen(eq + 1);
    char *buf = malloc(len + 1);
    if (!p->key || !buf || !(p->values = calloc(len + 1, sizeof *p->values))) {
        free(buf);
        return err_set(e, ERR_INTERNAL, "out of host memory");
    }
    /* values are split at ',' and '\,' is a comma inside one (alloc_conf lists its settings with commas) */
    char *out = buf;
    p->values[p->nvalues++] = buf;
    for (const char *s = eq + 1; *s; s++) {
        if (s[0] == '\\' && s[1] == ',')
            *out++ = *++s;
        else if (*s == ',') {
            *out++ = '\0';
            p->values[p->nvalues++] = out;
        } else
            *out++ = *s;
    }
    *out = '\0';
    for (size_t i = 0; i < p->nvalues; i++)
        if (!p->values[i][0])
            return err_set(e, ERR_INPUT, "--set %s: value %zu of '%s' is empty", p->key, i + 1, eq + 1);
    return 0;
}

void sweep_spec_free(struct sweep_spec *s)
{
    for (size_t i = 0; i < s->nparams; i++) {
        free(s->params[i].key);
        free(s->params[i].nvalues ? s->params[i].values[0] : NULL); /* the one buffer of every value */
        free(s->params[i].values);
    }
    free(s->params);
    free(s->devices);
}

int sweep_path(char *buf, size_t len, const char *dir, const char *what, size_t n)
{
    static const struct {
        const char *what, *fmt;
    } forms[] = {{"result", "%s/results/task-%zu.json"}, {"error", "%s/results/task-%zu.error.json"},
                 {"log", "%s/logs/task-%zu.log"}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        if (!strcmp(forms[i].what, what))
            return snprintf(buf, len, forms[i].fmt, dir, n) < (int)len ? 0 : -1;
    return -1;
}

/* The task's values, in --set order, for combination c (the last --set varies fastest). */
static void combination(const struct sweep_spec *s, size_t c, struct scenario_override *ov)
{
    for (size_t k = s->nparams; k-- > 0;) {
        ov[k] = (struct scenario_override){s->params[k].key, s->params[k].values[c % s->params[k].nvalues]};
        c /= s->params[k].nvalues;
    }
}

/* "NAME job.batch_size=4 @sim:rtx4090": the scenario's name, the values set, and the device when the sweep
 * has several; a sweep of one scenario on one device without --set keeps the name `oomlab run` shows. */
static json_t *task_json(const struct sweep_spec *s, const struct scenario *sc, const char *device,
                         const struct scenario_override *ov)
{
    char name[1024];
    size_t at = (size_t)snprintf(name, sizeof name, "%s", sc->name);
    json_t *set = json_object();
    for (size_t k = 0; k < s->nparams; k++) {
        at += (size_t)snprintf(name + at, at < sizeof name ? sizeof name - at : 0, " %s=%s", ov[k].key, ov[k].value);
        json_object_set_new(set, ov[k].key, json_string(ov[k].value));
    }
    if (s->ndevices > 1)
        snprintf(name + at, at < sizeof name ? sizeof name - at : 0, " @%s", device);
    return json_pack("{s:s, s:s, s:s?, s:o}", "name", name, "scenario", sc->path, "device", device, "set", set);
}

/* Every task of one scenario file. */
static int expand_file(const struct sweep_spec *s, const char *path, size_t ncomb, json_t *tasks, struct err *e)
{
    struct scenario_override ov[s->nparams ? s->nparams : 1];
    for (size_t d = 0; d < (s->ndevices ? s->ndevices : 1); d++) {
        for (size_t c = 0; c < ncomb; c++) {
            if (json_array_size(tasks) >= SWEEP_MAX_TASKS)
                return err_set(e, ERR_INPUT, "the sweep has more than %d tasks", SWEEP_MAX_TASKS);
            combination(s, c, ov);
            struct scenario sc;
            if (scenario_load_with(path, ov, s->nparams, &sc, e))
                return -1;
            json_t *t = task_json(s, &sc, s->ndevices ? s->devices[d] : NULL, ov);
            scenario_free(&sc);
            if (!t || json_array_append_new(tasks, t))
                return err_set(e, ERR_INTERNAL, "out of host memory");
        }
    }
    return 0;
}

json_t *sweep_expand(const struct sweep_spec *s, size_t *ntasks, struct err *e)
{
    struct device_spec spec;
    for (size_t d = 0; d < s->ndevices; d++)
        if (device_spec_parse(s->devices[d], &spec, e))
            return err_prefix(e, "--device %s: ", s->devices[d]), NULL;
    struct capacity cap;
    if (s->capacity && capacity_parse(s->capacity, &cap, e))
        return err_prefix(e, "--capacity: "), NULL;
    size_t ncomb = 1;
    for (size_t k = 0; k < s->nparams; k++) {
        for (size_t j = 0; j < k; j++)
            if (!strcmp(s->params[j].key, s->params[k].key))
                return err_set(e, ERR_INPUT, "--set %s is given twice", s->params[k].key), NULL;
        if (ncomb > SWEEP_MAX_TASKS / s->params[k].nvalues)
            return err_set(e, ERR_INPUT, "the sweep has more than %d tasks", SWEEP_MAX_TASKS), NULL;
        ncomb *= s->params[k].nvalues;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return err_set(e, ERR_INTERNAL, "cannot read the working directory: %s", strerror(errno)), NULL;
    json_t *tasks = json_array();
    int rc = tasks ? 0 : err_set(e, ERR_INTERNAL, "out of host memory");
    for (size_t i = 0; i < s->ninputs && rc == 0; i++) {
        struct scenario *all;
        size_t n;
        if ((rc = scenario_load_dir_or_file(s->inputs[i], &all, &n, e)))
            break;
        for (size_t k = 0; k < n && rc == 0; k++)
            rc = expand_file(s, all[k].path, ncomb, tasks, e);
        scenario_free_all(all, n);
    }
    if (rc) {
        json_decref(tasks);
        return NULL;
    }
    for (size_t i = 0; i < json_array_size(tasks); i++)
        json_object_set_new(json_array_get(tasks, i), "task", json_integer((json_int_t)i));
    *ntasks = json_array_size(tasks);
    return json_pack("{s:s, s:i, s:s, s:{s:s?, s:I}, s:o}", "schema", "oomlab-sweep", "schema_version",
                     SWEEP_SCHEMA_VERSION, "cwd", cwd, "options", "capacity", s->capacity, "max_forwards",
                     (json_int_t)s->max_forwards, "tasks", tasks);
}

int sweep_write(const char *dir, json_t *manifest, struct err *e)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/tasks.json", dir) >= (int)sizeof path)
        return err_set(e, ERR_INPUT, "--out %s: path too long", dir);
    if (access(path, F_OK) == 0)
        return err_set(e, ERR_INPUT, "--out %s already holds a sweep (tasks.json); merge it or choose another "
                                     "directory", dir);
    if (dir_make(dir, e))
        return err_prefix(e, "--out: ");
    char sub[PATH_MAX];
    snprintf(sub, sizeof sub, "%s/results", dir);
    if (dir_make(sub, e))
        return -1;
    snprintf(sub, sizeof sub, "%s/logs", dir);
    if (dir_make(sub, e))
        return -1;
    return json_write_file(path, json_incref(manifest), e);
}

json_t *sweep_read(const char *dir, size_t *ntasks, struct err *e)
{
    char path[PATH_MAX];
    json_error_t je;
    if (snprintf(path, sizeof path, "%s/tasks.json", dir) >= (int)sizeof path)
        return err_set(e, ERR_INPUT, "%s: path too long", dir), NULL;
    json_t *m = json_load_file(path, 0, &je);
    if (!m)
        return err_set(e, ERR_INPUT, "%s: not a sweep: %s", path, je.text), NULL;
    const char *schema = json_string_value(json_object_get(m, "schema"));
    const json_t *tasks = json_object_get(m, "tasks");
    if (!schema || strcmp(schema, "oomlab-sweep") || !json_is_array(tasks) ||
        json_integer_value(json_object_get(m, "schema_version")) != SWEEP_SCHEMA_VERSION ||
        !json_is_string(json_object_get(m, "cwd"))) {
        json_decref(m);
        return err_set(e, ERR_INPUT, "%s: not a sweep manifest of schema oomlab-sweep version %d", path,
                       SWEEP_SCHEMA_VERSION), NULL;
    }
    *ntasks = json_array_size(tasks);
    return m;
}

const json_t *sweep_task(const json_t *manifest, size_t n, const char **name)
{
    const json_t *t = json_array_get(json_object_get(manifest, "tasks"), n);
    *name = json_string_value(json_object_get(t, "name"));
    if (!*name)
        *name = "?";
    return t;
}

/* Runs task t (cwd already the sweep's) and writes its results document to result_path. */
static int run_task(const json_t *manifest, const json_t *t, const char *result_path, struct err *e)
{
    json_error_t je;
    const char *name, *scenario;
    json_t *set;
    json_int_t max_forwards = 0;
    if (json_unpack_ex((json_t *)t, &je, 0, "{s:s, s:s, s:o}", "name", &name, "scenario", &scenario, "set", &set) ||
        json_unpack_ex(json_object_get(manifest, "options"), &je, 0, "{s:I}", "max_forwards", &max_forwards) ||
        !json_is_object(set))
        return err_set(e, ERR_INPUT, "tasks.json: a task is not as sweep writes it: %s", je.text);
    /* null: the scenario's own device, the device's own capacity */
    const char *device = json_string_value(json_object_get(t, "device"));
    const char *capacity = json_string_value(json_object_get(json_object_get(manifest, "options"), "capacity"));
    struct harness_options opt = {.device = device, .max_forwards = (uint64_t)max_forwards};
    if (capacity && capacity_parse(capacity, &opt.capacity, e))
        return err_prefix(e, "--capacity: ");
    size_t nset = json_object_size(set), k = 0;
    struct scenario_override ov[nset ? nset : 1];
    const char *key;
    json_t *value;
    json_object_foreach(set, key, value)
        ov[k++] = (struct scenario_override){key, json_string_value(value) ? json_string_value(value) : ""};
    struct scenario sc;
    if (scenario_load_with(scenario, ov, nset, &sc, e))
        return -1;
    struct job_result *r = NULL;
    struct report_outputs out;
    int rc = report_outputs_open(&out, "sweep", result_path, NULL, false, e);
    if (rc == 0 && (rc = harness_run_scenario(&sc, &opt, &r, e)) == 0) {
        struct report_group g = {.kind = REPORT_SCENARIO, .name = name, .title = sc.title, .source = sc.source,
                                 .file = sc.path, .jobs = r, .njobs = sc.nvariants};
        report_outputs_add(&out, &g);
    }
    if (report_outputs_close(&out, rc == 0, e))
        rc = -1;
    free(r);
    scenario_free(&sc);
    return rc;
}

int sweep_run_task(const char *dir_arg, size_t n)
{
    struct err e = {0};
    char dir[PATH_MAX], path[PATH_MAX + 64], error_path[PATH_MAX + 64];
    size_t ntasks;
    json_t *m = NULL;
    if (!realpath(dir_arg, dir))
        err_set(&e, ERR_INPUT, "%s: %s", dir_arg, strerror(errno));
    else if ((m = sweep_read(dir, &ntasks, &e)) && n >= ntasks)
        err_set(&e, ERR_INPUT, "--task %zu: the sweep in %s has tasks 0 to %zu", n, dir, ntasks - 1);
    if (e.code)
        return json_decref(m), cli_fail("sweep", &e);
    sweep_path(path, sizeof path, dir, "result", n);
    sweep_path(error_path, sizeof error_path, dir, "error", n);
    const char *name_in, *cwd = json_string_value(json_object_get(m, "cwd"));
    const json_t *t = sweep_task(m, n, &name_in);
    char name[1024];
    snprintf(name, sizeof name, "%s", name_in);
    int rc = 0;
    if (chdir(cwd))
        rc = err_set(&e, ERR_INPUT, "cannot enter the sweep's working directory %s: %s", cwd, strerror(errno));
    else
        rc = run_task(m, t, path, &e);
    json_decref(m);
    if (rc == 0) {
        unlink(error_path); /* an earlier failure of this task is history */
        return 0;
    }
    unlink(path); /* an earlier run's results would pass for this one's */
    fprintf(stderr, "oomlab sweep: task %zu (%s): %s\n", n, name, e.msg);
    int code = e.code == ERR_INPUT ? 2 : 3;
    struct err we = {0};
    if (json_write_file(error_path, json_pack("{s:I, s:i, s:s}", "task", (json_int_t)n, "exit", code, "error", e.msg),
                        &we))
        fprintf(stderr, "oomlab sweep: %s\n", we.msg);
    return code;
}
