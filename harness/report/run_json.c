/* run_json.c: `oomlab run --json`: every scenario, every variant, PyTorch's memory_stats key names. */
#include "report/json_out.h"
#include "report/run_report.h"

static json_t *variant_json(const struct variant_result *r)
{
    char fixes[256];
    variant_fixes_text(r->variant, fixes, sizeof fixes);
    json_t *v = json_object();
    json_object_set_new(v, "name", json_string(r->variant->name));
    json_object_set_new(v, "fixes", json_string(fixes));
    json_object_set_new(v, "alloc_conf", json_string(r->variant->alloc.text));
    json_object_set_new(v, "device", json_string(r->device));
    json_object_set_new(v, "figures", json_string(r->run.measured ? "measured" : "modelled"));
    json_object_set_new(v, "stats", json_memory_stats(&r->run.stats));
    json_object_set_new(v, "unallocated_at_peak_reserved", json_integer((json_int_t)r->run.unallocated_at_peak));
    json_t *cat = json_object();
    for (int c = 0; c < CAT_COUNT; c++)
        json_object_set_new(cat, category_name((enum category)c), json_integer((json_int_t)r->run.category_at_peak[c]));
    json_object_set_new(v, "breakdown_at_peak_allocated", cat);
    json_t *phases = json_array();
    for (size_t i = 0; i < r->run.nphases; i++)
        json_array_append_new(phases, json_pack("{s:s, s:I, s:I, s:f, s:I}", "phase", r->run.phases[i].name,
                                                "peak_allocated", (json_int_t)r->run.phases[i].peak_allocated,
                                                "peak_reserved", (json_int_t)r->run.phases[i].peak_reserved,
                                                "kernel_seconds", r->run.phases[i].seconds, "device_used_delta",
                                                (json_int_t)r->run.phases[i].device_used_delta));
    json_object_set_new(v, "phases", phases);
    const struct run_oom *o = &r->run.oom;
    json_t *oom = json_null();
    if (o->happened) {
        json_t *live = json_object();
        for (int c = 0; c < CAT_COUNT; c++)
            json_object_set_new(live, category_name((enum category)c), json_integer((json_int_t)o->category_live[c]));
        oom = json_pack("{s:s, s:I, s:s, s:s, s:I, s:o, s:s}", "phase", o->phase, "step", (json_int_t)o->step, "tag",
                        o->tag, "category", category_name(o->category), "bytes", (json_int_t)o->bytes,
                        "breakdown_at_oom", live, "message", o->message);
    }
    json_object_set_new(v, "oom", oom);
    json_object_set_new(v, "throughput",
                        json_pack("{s:f, s:f, s:f, s:f, s:{s:I, s:f, s:f, s:f}, s:s}", "steps_per_s", r->steps_per_s,
                                  "samples_per_s", r->samples_per_s, "train_seconds", r->train_seconds, "train_flops",
                                  r->train_flops,
                                  "step_seconds", "steps", (json_int_t)r->run.steps_timed, "median",
                                  r->run.step_seconds_median, "min", r->run.step_seconds_min, "max",
                                  r->run.step_seconds_max, "figures", r->run.measured ? "measured" : "modelled"));
    json_object_set_new(v, "expect", json_pack("{s:b, s:s}", "ok", r->expect_ok, "why", r->expect_why));
    return v;
}

void report_json_add(json_t *scenarios, const struct scenario *sc, const struct variant_result *r, size_t n)
{
    json_t *s = json_object();
    json_object_set_new(s, "name", json_string(sc->name));
    json_object_set_new(s, "title", json_string(sc->title));
    json_object_set_new(s, "source", json_string(sc->source));
    json_object_set_new(s, "file", json_string(sc->path));
    json_t *vs = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(vs, variant_json(&r[i]));
    json_object_set_new(s, "variants", vs);
    json_array_append_new(scenarios, s);
}
