/* outputs.c: a command's report destinations (see outputs.h). */
#include "report/outputs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "report/json_out.h"

static bool is_stdout(const char *path)
{
    return path && !strcmp(path, "-");
}

int report_outputs_open(struct report_outputs *o, const char *command, const char *json_path, const char *csv_path,
                        bool tap, struct err *e)
{
    *o = (struct report_outputs){.command = command, .json_path = json_path, .csv_path = csv_path, .tap = tap};
    int on_stdout = is_stdout(json_path) + is_stdout(csv_path) + tap;
    if (on_stdout > 1)
        return err_set(e, ERR_INPUT, "only one of --json -, --csv - and --tap can use standard output");
    struct output_request req[] = {{"--json", json_path}, {"--csv", csv_path}};
    if (output_check_all(req, 2, e)) /* before any work: a path that cannot be written, or one file twice */
        return -1;
    o->table = on_stdout == 0;
    if (json_path && report_outputs_keep_document(o, e))
        return -1;
    if (csv_path) {
        if (output_open(&o->csv, csv_path, e)) {
            json_decref(o->groups);
            return -1;
        }
        o->csv_f = o->csv.f;
    }
    if (o->csv_f)
        report_csv_header(o->csv_f);
    return 0;
}

void report_outputs_add(struct report_outputs *o, const struct report_group *g)
{
    if (o->table)
        report_table(stdout, g);
    if (o->tap)
        report_tap(stdout, g, &o->tap_count);
    for (size_t i = 0; i < g->njobs; i++)
        o->failures += report_job_failed(g, i);
    if (o->groups)
        report_json_add(o->groups, g);
    if (o->csv_f)
        report_csv_rows(o->csv_f, g);
    fflush(stdout);
}

int report_outputs_keep_document(struct report_outputs *o, struct err *e)
{
    if (!o->groups && !(o->groups = json_array()))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    return 0;
}

json_t *report_outputs_document(struct report_outputs *o)
{
    return o->groups ? report_json_document(o->command, json_incref(o->groups)) : NULL;
}

int report_outputs_close(struct report_outputs *o, bool ok, struct err *e)
{
    int rc = ok ? 0 : -1;
    if (o->groups && o->json_path) {
        json_t *doc = report_json_document(o->command, o->groups);
        o->groups = NULL;
        if (rc == 0)
            rc = json_write_file(o->json_path, doc, e);
        else
            json_decref(doc);
    }
    json_decref(o->groups); /* without --json: kept only for report_outputs_document */
    o->groups = NULL;
    if (o->csv_f) {
        if (rc == 0)
            rc = output_commit(&o->csv, e);
        else
            output_abort(&o->csv);
    }
    if (o->tap && rc == 0)
        printf("1..%d\n", o->tap_count);
    if ((fflush(stdout) || ferror(stdout)) && rc == 0)
        rc = err_set(e, ERR_INTERNAL, "cannot write to standard output: %s", strerror(errno ? errno : EIO));
    return rc;
}
