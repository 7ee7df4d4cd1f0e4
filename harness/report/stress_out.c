/* stress_out.c: the stress table and the `stress` object of a job in the results document (see
 * stress_out.h). Columns are rows of one table per kind: a heading and the cell it shows. */
#include "report/stress_out.h"

#include <string.h>

#include "report/wrap.h"
#include "util/size.h"

struct column {
    const char *head;
    void (*cell)(const struct job_result *j, const struct stress_result *s, char *buf, size_t len);
};

static void bytes(uint64_t n, char *buf, size_t len)
{
    size_format_pytorch(n, buf, len);
}

static void count(uint64_t n, char *buf, size_t len)
{
    snprintf(buf, len, "%llu", (unsigned long long)n);
}

/* A cell showing expr (of the job j and its stress result s) with show: bytes or count. */
#define CELL(fn, show, expr)                                                                               \
    static void fn(const struct job_result *j, const struct stress_result *s, char *buf, size_t len)       \
    {                                                                                                      \
        (void)j, (void)s;                                                                                  \
        show((uint64_t)(expr), buf, len);                                                                  \
    }
#define BYTES_CELL(fn, expr) CELL(fn, bytes, expr)
#define COUNT_CELL(fn, expr) CELL(fn, count, expr)

COUNT_CELL(c_blocks, s->blocks)
BYTES_CELL(c_usable, s->usable_bytes)
BYTES_CELL(c_requested, s->requested_bytes)
BYTES_CELL(c_end_reserved, s->end_reserved)
BYTES_CELL(c_oom_request, s->oom_request)
BYTES_CELL(c_device_used, s->device_used_end)
COUNT_CELL(c_ops, s->ops)
COUNT_CELL(c_ooms, s->ooms)
BYTES_CELL(c_peak_reserved, j->run.peak_reserved)
BYTES_CELL(c_peak_allocated, j->run.peak_allocated)
BYTES_CELL(c_max_frag, s->max_fragmentation)
BYTES_CELL(c_last_frag, s->npoints ? s->points[s->npoints - 1].reserved - s->points[s->npoints - 1].allocated : 0)
BYTES_CELL(c_last_largest, s->npoints ? s->points[s->npoints - 1].largest_free : 0)
COUNT_CELL(c_recoveries, s->recoveries)
COUNT_CELL(c_drifts, s->drifts)
COUNT_CELL(c_steps, s->steps_run)
BYTES_CELL(c_steady_allocated, s->steady_allocated)
BYTES_CELL(c_steady_reserved, s->steady_reserved)
COUNT_CELL(c_invariant_checks, s->invariant_checks)
COUNT_CELL(c_record_streams, s->record_streams)
COUNT_CELL(c_syncs, s->syncs)
COUNT_CELL(c_pending_blocks, s->peak_pending_blocks)
BYTES_CELL(c_pending_bytes, s->peak_pending_bytes)

static void c_growth(const struct job_result *j, const struct stress_result *s, char *buf, size_t len)
{
    (void)j;
    snprintf(buf, len, "%+lld/%+lld", (long long)s->allocated_growth, (long long)s->reserved_growth);
}

static void c_checks(const struct job_result *j, const struct stress_result *s, char *buf, size_t len)
{
    (void)j;
    int held = 0;
    for (int i = 0; i < s->nchecks; i++)
        held += s->checks[i].ok;
    snprintf(buf, len, "%d/%d ok", held, s->nchecks);
}

#define MAX_COLUMNS 10
static const struct column columns[STRESS_KIND_COUNT][MAX_COLUMNS] = {
    [STRESS_FILL] = {{"blocks", c_blocks}, {"usable", c_usable}, {"requested", c_requested},
                     {"reserved", c_end_reserved}, {"device used", c_device_used}, {"OOM request", c_oom_request},
                     {"checks", c_checks}},
    [STRESS_CHURN] = {{"ops", c_ops}, {"OOMs", c_ooms}, {"peak reserved", c_peak_reserved},
                      {"max res-alloc", c_max_frag}, {"end res-alloc", c_last_frag}, {"largest free", c_last_largest},
                      {"checks", c_checks}},
    [STRESS_OOM_STORM] = {{"recoveries", c_recoveries}, {"drifts", c_drifts}, {"ops", c_ops},
                          {"peak reserved", c_peak_reserved}, {"checks", c_checks}},
    [STRESS_SOAK] = {{"steps", c_steps}, {"steady allocated", c_steady_allocated},
                     {"steady reserved", c_steady_reserved}, {"growth B alloc/res", c_growth},
                     {"checked steps", c_invariant_checks}, {"checks", c_checks}},
    [STRESS_STREAMS] = {{"ops", c_ops}, {"record_stream", c_record_streams}, {"syncs", c_syncs},
                        {"peak pending", c_pending_blocks}, {"pending bytes", c_pending_bytes},
                        {"peak allocated", c_peak_allocated}, {"peak reserved", c_peak_reserved},
                        {"checks", c_checks}},
};

#define SETTING_W 28
#define TABLE_POINTS 12
#define CELL_W 14

/* The allocator over time: a row per point, a column per setting (reserved - allocated / largest free). */
static void print_points(FILE *f, const struct report_group *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->njobs; i++)
        n = g->stress[i].npoints > n ? g->stress[i].npoints : n;
    if (n < 2)
        return;
    bool soak = g->stress[0].kind == STRESS_SOAK;
    fprintf(f, "   %s:\n", soak ? "each step's end (allocated / reserved)"
                                 : "over the run (reserved - allocated / largest free block)");
    fprintf(f, "   %-10s", soak ? "step" : "op");
    for (size_t i = 0; i < g->njobs; i++)
        fprintf(f, " %-*.*s", SETTING_W, SETTING_W, g->jobs[i].name);
    fputc('\n', f);
    /* at most TABLE_POINTS rows, evenly spaced, the last always (the JSON has every point) */
    size_t stride = (n + TABLE_POINTS - 1) / TABLE_POINTS;
    for (size_t k = stride - 1; k < n; k = k + stride < n || k == n - 1 ? k + stride : n - 1) {
        fprintf(f, "   %-10llu", (unsigned long long)g->stress[0].points[k < g->stress[0].npoints ? k : 0].op);
        for (size_t i = 0; i < g->njobs; i++) {
            char cell[64] = "-", frag[24], largest[24];
            if (k < g->stress[i].npoints) {
                const struct stress_point *p = &g->stress[i].points[k];
                bytes(soak ? p->allocated : p->reserved - p->allocated, frag, sizeof frag);
                bytes(soak ? p->reserved : p->largest_free, largest, sizeof largest);
                snprintf(cell, sizeof cell, "%s / %s", frag, largest);
            }
            fprintf(f, " %-*s", SETTING_W, cell);
        }
        fputc('\n', f);
    }
}

/* churn's compute load, and a real GPU's telemetry before and after. */
static void print_load(FILE *f, const struct job_result *j, const struct stress_result *s)
{
    char first[96], text[1024];
    snprintf(first, sizeof first, "   %s: ", j->name);
    if (s->burn_gemms) {
        snprintf(text, sizeof text, "compute load: %llu fp32 GEMMs (%.3g TFLOP) while churning, %.3g s of kernels (%s)",
                 (unsigned long long)s->burn_gemms, s->burn_flops / 1e12, j->run.kernel_seconds,
                 j->run.measured ? "measured" : "modelled");
        wrap_print(f, first, 5, text);
    }
    if (!s->telemetry && !s->telemetry_why[0])
        return;
    if (!s->telemetry) {
        snprintf(text, sizeof text, "GPU telemetry: none (%s)", s->telemetry_why);
        wrap_print(f, first, 5, text);
        return;
    }
    const struct nvml_gpu *g0 = &s->gpu_start, *g1 = &s->gpu_end;
    char r[12][24], e0[160], e1[160];
    nvml_reasons_format(g0->clock_event_reasons, e0, sizeof e0);
    nvml_reasons_format(g1->clock_event_reasons, e1, sizeof e1);
    snprintf(text, sizeof text,
             "GPU telemetry (measured, NVML), start -> end: %s -> %s C, %s -> %s mW, SM %s -> %s MHz, memory %s -> %s "
             "MHz, clock events %s -> %s, ECC errors corrected %s -> %s, uncorrected %s -> %s",
             nvml_reading_format(g0->temperature_c, "%lld", r[0], 24), nvml_reading_format(g1->temperature_c, "%lld", r[1], 24), nvml_reading_format(g0->power_mw, "%lld", r[2], 24),
             nvml_reading_format(g1->power_mw, "%lld", r[3], 24), nvml_reading_format(g0->sm_mhz, "%lld", r[4], 24), nvml_reading_format(g1->sm_mhz, "%lld", r[5], 24),
             nvml_reading_format(g0->mem_mhz, "%lld", r[6], 24), nvml_reading_format(g1->mem_mhz, "%lld", r[7], 24), e0, e1,
             nvml_reading_format(g0->ecc_corrected, "%lld", r[8], 24), nvml_reading_format(g1->ecc_corrected, "%lld", r[9], 24),
             nvml_reading_format(g0->ecc_uncorrected, "%lld", r[10], 24), nvml_reading_format(g1->ecc_uncorrected, "%lld", r[11], 24));
    wrap_print(f, first, 5, text);
}

void stress_table(FILE *f, const struct report_group *g)
{
    const struct stress_result *s0 = &g->stress[0];
    const struct job_result *j0 = &g->jobs[0];
    char total[32], free_start[32];
    bytes(s0->capacity, total, sizeof total);
    bytes(s0->device_free_start, free_start, sizeof free_start);
    fprintf(f, "== stress %s: %s\n", g->name, g->title ? g->title : "");
    fprintf(f, "   kind %s on %s%s%s: capacity %s, free at the start %s; figures %s\n", stress_kind_name(s0->kind),
            j0->device, *j0->device_detail ? " " : "", j0->device_detail, total, free_start,
            j0->run.measured ? "measured (real memory taken from the device under the allocator model)"
                             : "modelled (the allocator model's accounting)");
    const struct column *cols = columns[s0->kind];
    fprintf(f, "   %-*s", SETTING_W, "alloc_conf");
    for (int c = 0; c < MAX_COLUMNS && cols[c].head; c++)
        fprintf(f, " %*s", CELL_W, cols[c].head);
    fputc('\n', f);
    for (size_t i = 0; i < g->njobs; i++) {
        fprintf(f, "   %-*s", SETTING_W, g->jobs[i].name);
        for (int c = 0; c < MAX_COLUMNS && cols[c].head; c++) {
            char cell[48];
            cols[c].cell(&g->jobs[i], &g->stress[i], cell, sizeof cell);
            fprintf(f, " %*s", CELL_W, cell);
        }
        fputc('\n', f);
    }
    if (s0->kind == STRESS_CHURN || s0->kind == STRESS_SOAK)
        print_points(f, g);
    for (size_t i = 0; i < g->njobs; i++)
        print_load(f, &g->jobs[i], &g->stress[i]);
    for (size_t i = 0; i < g->njobs; i++)
        for (int k = 0; k < g->stress[i].nchecks; k++) {
            const struct stress_check *c = &g->stress[i].checks[k];
            fprintf(f, "   %s %s: %s: %s\n", c->ok ? "ok  " : "FAIL", g->jobs[i].name, c->what, c->detail);
        }
    fputc('\n', f);
}

/* NVML's readings of a GPU; null where it reports none. */
static json_t *gpu_json(const struct nvml_gpu *g)
{
    const struct {
        const char *key;
        long long v;
    } readings[] = {{"temperature_c", g->temperature_c}, {"power_mw", g->power_mw},
                    {"sm_mhz", g->sm_mhz},               {"mem_mhz", g->mem_mhz},
                    {"clock_event_reasons", g->clock_event_reasons},
                    {"ecc_corrected", g->ecc_corrected}, {"ecc_uncorrected", g->ecc_uncorrected}};
    json_t *o = json_pack("{s:s, s:s, s:I, s:I}", "name", g->name, "uuid", g->uuid, "total", (json_int_t)g->total,
                          "free", (json_int_t)g->free);
    for (size_t i = 0; i < sizeof readings / sizeof readings[0]; i++)
        json_object_set_new(o, readings[i].key, readings[i].v == NVML_UNKNOWN ? json_null() : json_integer(readings[i].v));
    return o;
}

json_t *stress_json(const struct stress_result *s)
{
    json_t *points = json_array(), *checks = json_array();
    for (size_t i = 0; i < s->npoints; i++) {
        const struct stress_point *p = &s->points[i];
        json_array_append_new(points, json_pack("{s:I, s:I, s:I, s:I, s:I}", "op", (json_int_t)p->op, "allocated",
                                                (json_int_t)p->allocated, "reserved", (json_int_t)p->reserved,
                                                "largest_free", (json_int_t)p->largest_free, "ooms",
                                                (json_int_t)p->ooms));
    }
    for (int i = 0; i < s->nchecks; i++)
        json_array_append_new(checks, json_pack("{s:s, s:b, s:s}", "what", s->checks[i].what, "ok", s->checks[i].ok,
                                                "detail", s->checks[i].detail));
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I}", "kind", stress_kind_name(s->kind), "capacity",
                          (json_int_t)s->capacity, "device_free_start", (json_int_t)s->device_free_start,
                          "device_used_end", (json_int_t)s->device_used_end, "ops", (json_int_t)s->ops);
    json_object_set_new(o, "ooms", json_integer((json_int_t)s->ooms));
    switch (s->kind) {
    case STRESS_FILL:
        json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I, s:I, s:b}", "blocks", (json_int_t)s->blocks,
                                            "usable_bytes", (json_int_t)s->usable_bytes, "requested_bytes",
                                            (json_int_t)s->requested_bytes, "end_reserved", (json_int_t)s->end_reserved,
                                            "oom_request", (json_int_t)s->oom_request, "ended_by_oom",
                                            s->ended_by_oom));
        break;
    case STRESS_CHURN:
        json_object_update_new(o, json_pack("{s:I, s:I, s:f}", "max_fragmentation", (json_int_t)s->max_fragmentation,
                                            "burn_gemms", (json_int_t)s->burn_gemms, "burn_flops", s->burn_flops));
        break;
    case STRESS_OOM_STORM:
        json_object_update_new(o, json_pack("{s:I, s:I}", "recoveries", (json_int_t)s->recoveries, "drifts",
                                            (json_int_t)s->drifts));
        break;
    case STRESS_SOAK:
        json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "steps", (json_int_t)s->steps_run,
                                            "steady_allocated", (json_int_t)s->steady_allocated, "steady_reserved",
                                            (json_int_t)s->steady_reserved, "allocated_growth",
                                            (json_int_t)s->allocated_growth, "reserved_growth",
                                            (json_int_t)s->reserved_growth, "invariant_checks",
                                            (json_int_t)s->invariant_checks));
        break;
    case STRESS_STREAMS:
        json_object_update_new(o, json_pack("{s:I, s:I, s:I, s:I}", "record_streams", (json_int_t)s->record_streams,
                                            "syncs", (json_int_t)s->syncs, "peak_pending_blocks",
                                            (json_int_t)s->peak_pending_blocks, "peak_pending_bytes",
                                            (json_int_t)s->peak_pending_bytes));
        break;
    }
    json_object_set_new(o, "telemetry", s->telemetry ? json_pack("{s:o, s:o}", "start", gpu_json(&s->gpu_start), "end",
                                                                 gpu_json(&s->gpu_end))
                                                    : json_null());
    json_object_set_new(o, "points", points);
    json_object_set_new(o, "checks", checks);
    return o;
}
