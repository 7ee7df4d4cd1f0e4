/* perfetto_test.c: the Perfetto/Chrome trace of report/perfetto.h, parsed back with jansson. For the small
 * text trace of timeline_run.h (no kernel time: one microsecond per op) every event has the fields the
 * Trace Event Format asks of its phase, timestamps never go back, the phases are slices at their ops,
 * the step and the OOM instant events at theirs, and the "allocated" counter's series sum to the run's
 * peak allocated bytes at its highest ("reserved" to its peak reserved). A scenario's run adds kernels as
 * slices in modelled time; the same checks hold there. */
#include <jansson.h>
#include <string.h>

#include "report/perfetto.h"
#include "run/harness.h"
#include "tap.h"
#include "timeline_run.h"

struct summary {
    bool shaped;       /* every event has the fields of its phase */
    bool monotonic;    /* ts never goes back */
    uint64_t top_allocated, top_reserved;
    size_t counters, slices, kernels, instants;
    char phases[8][32]; /* the first phase slices' names */
    double phase_ts[8], phase_dur[8];
    size_t nphases;
    double step_ts, oom_ts;
    const char *oom_phase;
    char clock[160];
};

static bool is_number(const json_t *j)
{
    return json_is_integer(j) || json_is_real(j);
}

static void summarize_event(json_t *ev, struct summary *s, double *last_ts)
{
    const char *ph = json_string_value(json_object_get(ev, "ph"));
    const char *name = json_string_value(json_object_get(ev, "name"));
    json_t *ts = json_object_get(ev, "ts"), *args = json_object_get(ev, "args");
    if (!ph || !name || !json_is_integer(json_object_get(ev, "pid"))) {
        s->shaped = false;
        return;
    }
    if (!strcmp(ph, "M"))
        return;
    if (!is_number(ts)) {
        s->shaped = false;
        return;
    }
    double t = json_number_value(ts);
    if (t < *last_ts)
        s->monotonic = false;
    *last_ts = t;
    if (!strcmp(ph, "C")) {
        uint64_t sum = 0;
        const char *key;
        json_t *value;
        s->shaped &= json_is_object(args) && json_object_size(args) > 0;
        json_object_foreach(args, key, value) {
            s->shaped &= json_is_integer(value);
            sum += (uint64_t)json_integer_value(value);
        }
        uint64_t *top = !strcmp(name, "allocated") ? &s->top_allocated : &s->top_reserved;
        if (sum > *top)
            *top = sum;
        s->counters++;
    } else if (!strcmp(ph, "X")) {
        json_t *dur = json_object_get(ev, "dur");
        int tid = (int)json_integer_value(json_object_get(ev, "tid"));
        s->shaped &= is_number(dur) && json_number_value(dur) >= 0 && (tid == 1 || tid == 2);
        s->slices++;
        s->kernels += tid == 2;
        if (tid == 1 && s->nphases < 8) {
            snprintf(s->phases[s->nphases], sizeof s->phases[0], "%s", name);
            s->phase_ts[s->nphases] = t;
            s->phase_dur[s->nphases++] = json_number_value(dur);
        }
    } else if (!strcmp(ph, "i")) {
        const char *scope = json_string_value(json_object_get(ev, "s"));
        s->shaped &= scope && (!strcmp(scope, "t") || !strcmp(scope, "g"));
        s->instants++;
        if (!strncmp(name, "step 1", 7))
            s->step_ts = t;
        if (!strncmp(name, "OOM: ", 5)) {
            s->oom_ts = t;
            s->oom_phase = json_string_value(json_object_get(args, "phase"));
        }
    } else {
        s->shaped = false;
    }
}

/* Loads path; *root must be json_decref'd. */
static bool summarize(const char *path, struct summary *s, json_t **root)
{
    *s = (struct summary){.shaped = true, .monotonic = true, .step_ts = -1, .oom_ts = -1};
    json_error_t je;
    *root = json_load_file(path, 0, &je);
    if (!*root) {
        diag("%s:%d:%d: %s", path, je.line, je.column, je.text);
        return false;
    }
    json_t *events = json_object_get(*root, "traceEvents");
    if (!json_is_array(events) || !json_is_string(json_object_get(*root, "displayTimeUnit")))
        return false;
    snprintf(s->clock, sizeof s->clock, "%s",
             json_string_value(json_object_get(json_object_get(*root, "otherData"), "clock")) ?: "");
    double last_ts = -1;
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) summarize_event(ev, s, &last_ts);
    return true;
}

/* Writes t's trace to DIR/NAME and reads it back into *s (*root to json_decref). */
static bool write_and_read(const char *dir, const char *name, struct timeline *t, const struct job_result *r,
                           struct summary *s, json_t **root)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct err e = {0};
    *root = NULL;
    if (perfetto_write(path, t, r, &e)) {
        diag("%s", e.msg);
        return false;
    }
    return summarize(path, s, root);
}

static void tiny_trace(const char *dir)
{
    struct timeline *tl;
    struct job_result r;
    ok(tiny_run(&tl, &r) == 0, "the small text trace runs");
    struct summary s;
    json_t *root;
    ok(write_and_read(dir, "tiny.json", tl, &r, &s, &root),
       "the trace is written and parses as JSON with traceEvents and displayTimeUnit");
    ok(s.shaped, "every event has the fields of its phase (ph, name, pid; ts; dur and tid for slices; s for instants)");
    ok(s.monotonic, "timestamps never go back");
    is_u64(s.top_allocated, r.run.peak_allocated, "the allocated series sum to the peak, 28 MiB, at their highest");
    is_u64(s.top_reserved, r.run.peak_reserved, "reserved reaches the peak reserved, 36 MiB");
    ok(strstr(s.clock, "one microsecond per op") != NULL, "no kernel time: one microsecond per op (%s)", s.clock);
    ok(s.nphases == 3 && !strcmp(s.phases[0], "load") && !strcmp(s.phases[1], "forward") &&
           !strcmp(s.phases[2], "backward"),
       "three phase slices: load, forward, backward");
    ok(s.phase_ts[0] == 1 && s.phase_dur[0] == 3 && s.phase_ts[1] == 4 && s.phase_dur[1] == 4 && s.phase_ts[2] == 8 &&
           s.phase_dur[2] == 2,
       "at ops 1-3, 4-7 and 8-10 (ts %g %g %g, dur %g %g %g)", s.phase_ts[0], s.phase_ts[1], s.phase_ts[2],
       s.phase_dur[0], s.phase_dur[1], s.phase_dur[2]);
    ok(s.step_ts == 3, "step 1 at op 3");
    ok(s.oom_ts == 10 && s.oom_phase && !strcmp(s.oom_phase, "backward"), "the OOM at op 10, in backward");
    json_decref(root);
    timeline_destroy(tl);
}

/* Points that share a time become one counter event with the highest of them: ops 1-3 at 1 s allocate
 * 5, 9, 4; ops 4-5 at 2 s 3, 2 (a kernel, op 4, ran from 1 s to 2 s). */
static void same_time(const char *dir)
{
    static const uint64_t a[] = {5, 9, 4, 3, 2};
    static const double at[] = {1, 1, 1, 2, 2};
    struct timeline *t = timeline_create(64);
    for (int i = 0; i < 5; i++) {
        uint64_t cat[CAT_COUNT] = {[CAT_ACTIVATION] = a[i]};
        struct op op = {.kind = i == 3 ? OP_KERNEL : OP_ALLOC, .name = "m"};
        timeline_record(t, &op, &(struct timeline_sample){at[i], a[i], 16, cat});
    }
    timeline_end(t, &(struct timeline_sample){2, 2, 16, NULL});
    struct job_result r = {.has_expect = true};
    struct summary s;
    json_t *root;
    ok(write_and_read(dir, "same-time.json", t, &r, &s, &root) && s.shaped && s.monotonic,
       "same times: written, parses, well formed, in order");
    is_u64(s.top_allocated, 9, "same times: the highest of the points at 1 s, 9, is kept");
    is_int(s.counters, 6, "same times: one allocated and one reserved event at each of 0 s, 1 s and 2 s");
    json_decref(root);
    timeline_destroy(t);
}

static void scenario_trace(const char *dir)
{
    struct scenario *sc;
    size_t n;
    struct err e = {0};
    if (!ok(scenario_load_dir_or_file("scenarios/vit_lora_linear_probe.yaml", &sc, &n, &e) == 0, "scenario loads (%s)",
            e.msg))
        return;
    const struct variant *v = &sc[0].variants[sc[0].nvariants - 1]; /* one that fits: it runs every step */
    struct harness_options opt = {.perfetto_dir = dir};
    struct job_result r;
    ok(harness_run_variant(&sc[0], v, NULL, &opt, &r, &e) == 0 && !r.run.oom.happened, "variant %s runs and fits (%s)",
       v->name, e.msg);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s--%s.json", dir, sc[0].name, v->name);
    struct summary s;
    json_t *root = NULL;
    ok(summarize(path, &s, &root), "%s--%s.json parses", sc[0].name, v->name);
    ok(s.shaped && s.monotonic, "every event well formed, timestamps in order");
    ok(strstr(s.clock, "kernel time, modelled: kernel-time model for") != NULL, "clock: modelled kernel time (%s)", s.clock);
    ok(s.kernels > 1000 && s.kernels == r.run.kernels, "every kernel a slice (%zu of %llu)", s.kernels,
       (unsigned long long)r.run.kernels);
    is_u64(s.top_allocated, r.run.peak_allocated, "allocated series sum to the run's peak allocated");
    is_u64(s.top_reserved, r.run.peak_reserved, "reserved reaches the run's peak reserved");
    json_decref(root);
    scenario_free_all(sc, n);
}

int main(void)
{
    char dir[] = "/tmp/oomlab-perfetto-XXXXXX";
    if (!mkdtemp(dir))
        tap_skip_all("cannot make a temporary directory");
    tiny_trace(dir);
    same_time(dir);
    scenario_trace(dir);
    remove_tmp_dir(dir);
    return done_testing();
}
