/* gate.c: comparing results with a baseline (see gate.h). */
#include "report/gate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "report/xml_lib.h"
#include "util/output.h"
#include "util/size.h"
#include "util/vec.h"

struct job_figures {
    const char *group, *job;
    double peak_allocated, peak_reserved, samples_per_s;
    bool oom, modelled;
};

static int check_document(const json_t *doc, const char *which, struct err *e)
{
    const char *schema = json_string_value(json_object_get(doc, "schema"));
    json_int_t version = json_integer_value(json_object_get(doc, "schema_version"));
    if (!schema || strcmp(schema, "oomlab-results") || !json_is_array(json_object_get(doc, "groups")))
        return err_set(e, ERR_INPUT, "%s is not an oomlab results document (schema oomlab-results)", which);
    if (version != RESULTS_SCHEMA_VERSION)
        return err_set(e, ERR_INPUT, "%s has results schema version %lld; this oomlab reads version %d", which,
                       (long long)version, RESULTS_SCHEMA_VERSION);
    return 0;
}

static double number(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

static struct job_figures figures_of(const json_t *group, const json_t *job)
{
    const json_t *stats = json_object_get(job, "stats"), *tp = json_object_get(job, "throughput");
    const char *fig = json_string_value(json_object_get(job, "figures"));
    return (struct job_figures){
        .group = json_string_value(json_object_get(group, "name")),
        .job = json_string_value(json_object_get(job, "name")),
        .peak_allocated = number(stats, "allocated_bytes.all.peak"),
        .peak_reserved = number(stats, "reserved_bytes.all.peak"),
        .samples_per_s = number(tp, "samples_per_s"),
        .oom = !json_is_null(json_object_get(job, "oom")) && json_object_get(job, "oom"),
        .modelled = fig && !strcmp(fig, "modelled"),
    };
}

/* The job named group/job in doc, or NULL. */
static const json_t *find_job(const json_t *doc, const char *group, const char *job, const json_t **g_out)
{
    size_t i, k;
    const json_t *g, *j;
    json_array_foreach(json_object_get(doc, "groups"), i, g) {
        const char *gn = json_string_value(json_object_get(g, "name"));
        if (!gn || strcmp(gn, group))
            continue;
        json_array_foreach(json_object_get(g, "jobs"), k, j) {
            const char *jn = json_string_value(json_object_get(j, "name"));
            if (jn && !strcmp(jn, job)) {
                *g_out = g;
                return j;
            }
        }
    }
    return NULL;
}

static int add_row(struct gate_result *r, size_t *cap, const char *group, const char *job, const char *metric,
                   double base, double now, enum gate_verdict v)
{
    if (vec_grow((void **)&r->rows, cap, r->nrows + 1, sizeof *r->rows))
        return -1;
    struct gate_row *row = &r->rows[r->nrows++];
    *row = (struct gate_row){.metric = metric, .base = base, .now = now, .verdict = v};
    snprintf(row->group, sizeof row->group, "%s", group ? group : "?");
    snprintf(row->job, sizeof row->job, "%s", job ? job : "?");
    r->regressions += v == GATE_REGRESSED || v == GATE_MISSING;
    r->improvements += v == GATE_IMPROVED;
    return 0;
}

/* Higher is worse (peaks) or better (throughput). */
static enum gate_verdict judge(double base, double now, double tol, bool higher_is_worse)
{
    double worse = higher_is_worse ? now - base : base - now;
    if (worse > tol * fabs(base))
        return GATE_REGRESSED;
    if (-worse > tol * fabs(base))
        return GATE_IMPROVED;
    return GATE_SAME;
}

static int compare_job(struct gate_result *r, size_t *cap, const struct job_figures *b, const struct job_figures *n,
                       double tol)
{
    enum gate_verdict outcome = b->oom == n->oom ? GATE_SAME : n->oom ? GATE_REGRESSED : GATE_IMPROVED;
    int rc = add_row(r, cap, b->group, b->job, "outcome", b->oom, n->oom, outcome);
    rc = rc || add_row(r, cap, b->group, b->job, "peak allocated", b->peak_allocated, n->peak_allocated,
                       judge(b->peak_allocated, n->peak_allocated, tol, true));
    rc = rc || add_row(r, cap, b->group, b->job, "peak reserved", b->peak_reserved, n->peak_reserved,
                       judge(b->peak_reserved, n->peak_reserved, tol, true));
    if (!rc && b->modelled && n->modelled && b->samples_per_s > 0 && n->samples_per_s > 0)
        rc = add_row(r, cap, b->group, b->job, "samples/s", b->samples_per_s, n->samples_per_s,
                     judge(b->samples_per_s, n->samples_per_s, tol, false));
    return rc;
}

int gate_compare(const json_t *baseline, const json_t *now, double tolerance, struct gate_result *out, struct err *e)
{
    *out = (struct gate_result){0};
    if (check_document(baseline, "the baseline", e) || check_document(now, "the run", e))
        return -1;
    size_t cap = 0, i, k;
    const json_t *g, *j;
    int rc = 0;
    json_array_foreach(json_object_get(baseline, "groups"), i, g) {
        json_array_foreach(json_object_get(g, "jobs"), k, j) {
            struct job_figures b = figures_of(g, j);
            const json_t *ng, *nj = b.group && b.job ? find_job(now, b.group, b.job, &ng) : NULL;
            out->jobs++;
            if (!nj) {
                rc = rc || add_row(out, &cap, b.group, b.job, "job", 1, 0, GATE_MISSING);
                continue;
            }
            struct job_figures n = figures_of(ng, nj);
            rc = rc || compare_job(out, &cap, &b, &n, tolerance);
        }
    }
    json_array_foreach(json_object_get(now, "groups"), i, g) {
        json_array_foreach(json_object_get(g, "jobs"), k, j) {
            struct job_figures n = figures_of(g, j);
            const json_t *bg;
            if (n.group && n.job && !find_job(baseline, n.group, n.job, &bg))
                rc = rc || add_row(out, &cap, n.group, n.job, "job", 0, 1, GATE_NEW);
        }
    }
    if (rc) {
        gate_result_free(out);
        return err_set(e, ERR_INTERNAL, "out of host memory comparing results");
    }
    return 0;
}

void gate_result_free(struct gate_result *r)
{
    free(r->rows);
    *r = (struct gate_result){0};
}

static void value_text(const struct gate_row *row, double v, char *buf, size_t len)
{
    if (!strcmp(row->metric, "outcome"))
        snprintf(buf, len, "%s", v ? "OOM" : "fits");
    else if (!strcmp(row->metric, "samples/s"))
        snprintf(buf, len, "%.2f", v);
    else
        size_format_pytorch((uint64_t)v, buf, len);
}

static const char *verdict_text(enum gate_verdict v)
{
    static const char *const t[] = {"same", "improved", "REGRESSED", "new", "MISSING"};
    return t[v];
}

/* "scenario/variant", shortened from the left to fit width columns */
static void job_label(const struct gate_row *row, char *buf, size_t width)
{
    char full[330];
    snprintf(full, sizeof full, "%s/%s", row->group, row->job);
    size_t n = strlen(full);
    if (n <= width) {
        memcpy(buf, full, n + 1);
        return;
    }
    memcpy(buf, "...", 3);
    memcpy(buf + 3, full + n - (width - 3), width - 2); /* the rest and its NUL */
}

void gate_print(FILE *f, const struct gate_result *r, double tolerance)
{
    fprintf(f, "oomlab check: %zu job%s against the baseline, tolerance %g%%: %zu regressed, %zu improved\n", r->jobs,
            r->jobs == 1 ? "" : "s", tolerance * 100.0, r->regressions, r->improvements);
    bool header = false;
    for (size_t i = 0; i < r->nrows; i++) {
        const struct gate_row *row = &r->rows[i];
        if (row->verdict == GATE_SAME)
            continue;
        if (!header)
            fprintf(f, "  %-40s %-14s %12s %12s %8s  %s\n", "job", "figure", "baseline", "now", "change", "verdict");
        header = true;
        char label[41], b[32], n[32], change[16] = "-";
        job_label(row, label, 40);
        if (row->verdict == GATE_MISSING || row->verdict == GATE_NEW) {
            fprintf(f, "  %-40s %-14s %12s %12s %8s  %s\n", label, "job", row->verdict == GATE_NEW ? "-" : "ran",
                    row->verdict == GATE_NEW ? "ran" : "-", "", verdict_text(row->verdict));
            continue;
        }
        value_text(row, row->base, b, sizeof b);
        value_text(row, row->now, n, sizeof n);
        if (strcmp(row->metric, "outcome") && row->base != 0)
            snprintf(change, sizeof change, "%+.1f%%", 100.0 * (row->now - row->base) / row->base);
        fprintf(f, "  %-40s %-14s %12s %12s %8s  %s\n", label, row->metric, b, n, change, verdict_text(row->verdict));
    }
}

/* The regressions of one job, as one failure message. */
static void job_failures(const struct gate_result *r, size_t first, size_t end, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = first; i < end; i++) {
        const struct gate_row *row = &r->rows[i];
        if (row->verdict != GATE_REGRESSED && row->verdict != GATE_MISSING)
            continue;
        char b[32], n[32];
        value_text(row, row->base, b, sizeof b);
        value_text(row, row->now, n, sizeof n);
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s%s: %s", at ? "; " : "", row->metric,
                 row->verdict == GATE_MISSING ? "the job is no longer run" : "");
        at = strlen(buf);
        if (row->verdict == GATE_REGRESSED)
            snprintf(buf + at, len - at, "%s -> %s", b, n);
    }
}

int gate_write_junit(const char *path, const struct gate_result *r, double tolerance, struct err *e)
{
    if (xml_lib_load(e))
        return -1;
    xmlBufferPtr buf = xmlBufferCreate();
    xmlTextWriterPtr w = buf ? xmlNewTextWriterMemory(buf, 0) : NULL;
    if (!w) {
        xmlBufferFree(buf);
        return err_set(e, ERR_INTERNAL, "out of host memory writing JUnit XML");
    }
    char count[32];
    xmlTextWriterSetIndent(w, 1);
    xmlTextWriterStartDocument(w, NULL, "UTF-8", NULL);
    xmlTextWriterStartElement(w, BAD_CAST "testsuites");
    xmlTextWriterWriteAttribute(w, BAD_CAST "name", BAD_CAST "oomlab check");
    snprintf(count, sizeof count, "%zu", r->jobs);
    xmlTextWriterWriteAttribute(w, BAD_CAST "tests", BAD_CAST count);
    snprintf(count, sizeof count, "%zu", r->regressions);
    xmlTextWriterWriteAttribute(w, BAD_CAST "failures", BAD_CAST count);
    const char *open_group = NULL;
    for (size_t i = 0; i < r->nrows;) {
        size_t end = i + 1;
        while (end < r->nrows && !strcmp(r->rows[end].group, r->rows[i].group) && !strcmp(r->rows[end].job, r->rows[i].job))
            end++;
        if (!open_group || strcmp(open_group, r->rows[i].group)) {
            if (open_group)
                xmlTextWriterEndElement(w);
            xmlTextWriterStartElement(w, BAD_CAST "testsuite");
            xmlTextWriterWriteAttribute(w, BAD_CAST "name", BAD_CAST r->rows[i].group);
            open_group = r->rows[i].group;
        }
        xmlTextWriterStartElement(w, BAD_CAST "testcase");
        xmlTextWriterWriteAttribute(w, BAD_CAST "classname", BAD_CAST r->rows[i].group);
        xmlTextWriterWriteAttribute(w, BAD_CAST "name", BAD_CAST r->rows[i].job);
        char msg[1024];
        job_failures(r, i, end, msg, sizeof msg);
        if (msg[0]) {
            char type[64];
            snprintf(type, sizeof type, "regression beyond %g%%", tolerance * 100.0);
            xmlTextWriterStartElement(w, BAD_CAST "failure");
            xmlTextWriterWriteAttribute(w, BAD_CAST "type", BAD_CAST type);
            xmlTextWriterWriteAttribute(w, BAD_CAST "message", BAD_CAST msg);
            xmlTextWriterEndElement(w);
        }
        xmlTextWriterEndElement(w);
        i = end;
    }
    int ok = xmlTextWriterEndDocument(w) >= 0;
    xmlFreeTextWriter(w);
    struct output af;
    int rc = ok ? output_open(&af, path, e) : err_set(e, ERR_INTERNAL, "cannot build the JUnit XML");
    if (rc == 0 && fwrite(xmlBufferContent(buf), 1, (size_t)xmlBufferLength(buf), af.f) != (size_t)xmlBufferLength(buf)) {
        output_abort(&af);
        rc = err_set(e, ERR_INTERNAL, "%s: cannot write", path);
    } else if (rc == 0) {
        rc = output_commit(&af, e);
    }
    xmlBufferFree(buf);
    return rc;
}
