/* json_report.c: the results document of run, fit and replay (docs/results-schema.md): groups of jobs,
 * PyTorch's memory_stats key names kept. */
#include "report/json_out.h"
#include "report/robust_out.h"
#include "report/stress_out.h"
#include "report/report.h"

static const char *figures(const struct job_result *r)
{
    return r->run.measured ? "measured" : "modelled";
}

static json_t *category_bytes(const uint64_t *bytes)
{
    json_t *o = json_object();
    for (int c = 0; c < CAT_COUNT; c++)
        json_object_set_new(o, category_name((enum category)c), json_integer((json_int_t)bytes[c]));
    return o;
}

static json_t *oom_json(const struct run_oom *o)
{
    return json_pack("{s:I, s:s, s:I, s:s, s:s, s:I, s:o, s:s}", "where", (json_int_t)o->where, "phase", o->phase,
                     "step", (json_int_t)o->step, "tag", o->tag, "category", category_name(o->category), "bytes",
                     (json_int_t)o->bytes, "breakdown_at_oom", category_bytes(o->category_live), "message",
                     o->message);
}

static json_t *phases_json(const struct run_result *run)
{
    json_t *phases = json_array();
    for (size_t i = 0; i < run->nphases; i++)
        json_array_append_new(phases, json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:I}", "phase", run->phases[i].name,
                                                "peak_allocated", (json_int_t)run->phases[i].peak_allocated,
                                                "peak_reserved", (json_int_t)run->phases[i].peak_reserved,
                                                "peak_allocated_step", (json_int_t)run->phases[i].peak_allocated_step,
                                                "peak_reserved_step", (json_int_t)run->phases[i].peak_reserved_step,
                                                "kernel_seconds", run->phases[i].seconds, "device_used_delta",
                                                (json_int_t)run->phases[i].device_used_delta));
    return phases;
}

/* The first OOMs and warnings in full, and how many there were in all. */
static json_t *events_json(const struct run_result *run)
{
    json_t *ooms = json_array(), *warnings = json_array();
    for (uint64_t i = 0; i < run->nooms && i < RUN_MAX_OOMS; i++)
        json_array_append_new(ooms, oom_json(&run->ooms[i]));
    for (uint64_t i = 0; i < run->nwarnings && i < RUN_MAX_WARNINGS; i++)
        json_array_append_new(warnings, json_string(run->warnings[i]));
    return json_pack("{s:I, s:o, s:I, s:o, s:I}", "ooms", (json_int_t)run->nooms, "first_ooms", ooms, "warnings",
                     (json_int_t)run->nwarnings, "first_warnings", warnings, "frees_of_unknown",
                     (json_int_t)run->frees_of_unknown);
}

static json_t *replay_json(const struct job_result *r)
{
    const struct replay_info *ri = &r->replay;
    const struct recorded_check *c = &ri->check;
    json_t *check = !ri->checked ? json_null()
                                 : json_pack("{s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:s?, "
                                             "s:{s:I, s:I, s:I, s:I, s:b}}",
                                             "segment_allocs_recorded", (json_int_t)c->segment_allocs_recorded,
                                             "segment_allocs_matched", (json_int_t)c->segment_allocs_matched,
                                             "segment_maps_recorded", (json_int_t)c->segment_maps_recorded,
                                             "segment_maps_matched", (json_int_t)c->segment_maps_matched,
                                             "final_layout_matched",
                                             c->final_layout_matched, "final_segments", (json_int_t)c->final_segments,
                                             "final_segments_matched", (json_int_t)c->final_segments_matched, "allocs",
                                             (json_int_t)c->allocs, "addresses_matched",
                                             (json_int_t)c->addresses_matched, "ooms_recorded",
                                             (json_int_t)c->ooms_recorded, "ooms_reproduced",
                                             (json_int_t)c->ooms_reproduced, "first_mismatch",
                                             c->first_mismatch[0] ? c->first_mismatch : NULL, "at_end",
                                             "recorded_reserved", (json_int_t)c->recorded_reserved,
                                             "recorded_allocated", (json_int_t)c->recorded_allocated,
                                             "replayed_reserved", (json_int_t)c->replayed_reserved,
                                             "replayed_allocated", (json_int_t)c->replayed_allocated, "drifted",
                                             replay_drifted(c));
    return json_pack("{s:s, s:b, s:I, s:I, s:s, s:s, s:I, s:s, s:o}", "input",
                     ri->input_kind ? ri->input_kind : "?", "rebuilt_start", ri->rebuilt_start, "inferred_sizes",
                     (json_int_t)ri->inferred_sizes, "private_pool_segments", (json_int_t)ri->private_pool_segments,
                     "settings_from", ri->settings_from, "capacity_from",
                     ri->capacity_from, "needed_bytes", (json_int_t)ri->needed, "addresses", ri->addresses, "check",
                     check);
}

static json_t *throughput_json(const struct job_result *r)
{
    json_t *t = json_pack("{s:f, s:f, s:f, s:f, s:{s:I, s:f, s:f, s:f}, s:s, s:s}", "steps_per_s", r->steps_per_s,
                          "samples_per_s", r->samples_per_s, "train_seconds", r->train_seconds, "train_flops",
                          r->train_flops, "step_seconds", "steps", (json_int_t)r->run.steps_timed, "median",
                          r->run.step_seconds_median, "min", r->run.step_seconds_min, "max", r->run.step_seconds_max,
                          "figures", figures(r), "timed_by", r->timed_by);
    if (r->run.measured) { /* the wall clock beside the device's own clock or events */
        json_t *wall = json_pack("{s:{s:f, s:f, s:f}, s:f}", "step_wall_seconds",
                                 "median", r->run.step_wall_seconds_median, "min", r->run.step_wall_seconds_min, "max",
                                 r->run.step_wall_seconds_max, "wall_seconds", r->run.wall_seconds);
        json_object_update(t, wall);
        json_decref(wall);
    }
    return t;
}

static json_t *points_json(const struct run_result *run)
{
    json_t *points = json_array();
    for (size_t i = 0; i < run->npoints; i++) {
        const struct run_point *p = &run->points[i];
        json_array_append_new(points, json_pack("{s:s, s:I, s:I, s:I, s:o}", "phase", p->phase, "step",
                                                (json_int_t)p->step, "allocated", (json_int_t)p->allocated,
                                                "reserved", (json_int_t)p->reserved, "categories",
                                                category_bytes(p->category)));
    }
    return points;
}

static json_t *holders_view_json(const struct holders_view *v)
{
    if (!v->seen)
        return json_null();
    json_t *top = json_array();
    for (size_t i = 0; i < v->n; i++)
        json_array_append_new(top, json_pack("{s:s, s:s, s:s, s:I, s:I}", "holder", v->top[i].tag, "category",
                                             category_name((enum category)v->top[i].category), "phase",
                                             v->top[i].phase, "bytes", (json_int_t)v->top[i].bytes, "count",
                                             (json_int_t)v->top[i].count));
    return json_pack("{s:I, s:I, s:o}", "step", (json_int_t)v->step, "allocated", (json_int_t)v->total, "top", top);
}

static json_t *holders_json(const struct holders_result *h)
{
    json_t *leaks = json_array();
    for (size_t i = 0; i < h->nleaks; i++)
        json_array_append_new(leaks, json_pack("{s:s, s:s, s:I, s:I}", "holder", h->leaks[i].tag, "category",
                                               category_name((enum category)h->leaks[i].category), "since_step",
                                               (json_int_t)h->leaks[i].since_step, "grown",
                                               (json_int_t)h->leaks[i].grown));
    return json_pack("{s:o, s:o, s:o}", "at_peak", holders_view_json(&h->at_peak), "at_oom",
                     holders_view_json(&h->at_oom), "leaks", leaks);
}

static json_t *job_json(const struct report_group *g, size_t i)
{
    const struct job_result *r = &g->jobs[i];
    json_t *v = json_object();
    json_object_set_new(v, "name", json_string(r->name));
    json_object_set_new(v, "fixes", json_string(r->fixes));
    json_object_set_new(v, "alloc_conf", json_string(r->alloc_conf));
    json_object_set_new(v, "device", json_string(r->device));
    json_object_set_new(v, "device_detail", json_string(r->device_detail));
    json_object_set_new(v, "device_total", json_integer((json_int_t)r->device_total));
    json_object_set_new(v, "steps_planned", json_integer(r->steps_planned));
    json_object_set_new(v, "figures", json_string(figures(r)));
    json_object_set_new(v, "stats", json_memory_stats(&r->run.stats));
    json_object_set_new(v, "unallocated_at_peak_reserved", json_integer((json_int_t)r->run.unallocated_at_peak));
    json_object_set_new(v, "unified_memory",
                        json_pack("{s:I, s:I}", "peak_resident", (json_int_t)r->run.managed_peak, "on_host",
                                  (json_int_t)r->run.managed_on_host));
    if (r->has_assumptions && r->assumptions.nccl_bytes) /* only for job.parallel: other reports keep their keys */
        json_object_set_new(v, "nccl_buffers",
                            json_pack("{s:I, s:i, s:s}", "bytes", (json_int_t)r->assumptions.nccl_bytes, "channels",
                                      r->assumptions.nccl_channels, "figures", "modelled"));
    json_object_set_new(v, "breakdown_at_peak_allocated", category_bytes(r->run.category_at_peak));
    json_object_set_new(v, "peaks",
                        json_pack("{s:I, s:I, s:s, s:I, s:I, s:s}", "allocated", (json_int_t)r->run.peak_allocated,
                                  "allocated_step", (json_int_t)r->run.peak_allocated_step, "allocated_phase",
                                  r->run.peak_allocated_phase, "reserved", (json_int_t)r->run.peak_reserved,
                                  "reserved_step", (json_int_t)r->run.peak_reserved_step, "reserved_phase",
                                  r->run.peak_reserved_phase));
    json_object_set_new(v, "phases", phases_json(&r->run));
    json_object_set_new(v, "points", points_json(&r->run));
    const struct job_assumptions *a = &r->assumptions;
    json_t *as = !r->has_assumptions
                     ? json_null()
                     : json_pack("{s:s, s:s, s:s, s:s, s:i, s:b, s:b}", "attention", a->attention, "activation",
                                 a->activation, "precision", a->precision, "optimizer", a->optimizer, "steps", a->steps,
                                 "use_cache", a->use_cache, "kernel_scratch", a->kernel_scratch);
    if (r->has_assumptions && a->routing[0]) /* only for MoE models: dense reports keep their keys */
        json_object_set_new(as, "routing", json_string(a->routing));
    json_object_set_new(v, "assumptions", as);
    json_object_set_new(v, "oom", r->run.oom.happened ? oom_json(&r->run.oom) : json_null());
    json_object_set_new(v, "events", events_json(&r->run));
    json_object_set_new(v, "holders", holders_json(&r->holders));
    json_object_set_new(v, "throughput", throughput_json(r));
    json_object_set_new(v, "robust", robust_json(&r->robust));
    json_object_set_new(v, "expect",
                        r->has_expect ? json_pack("{s:b, s:b, s:s}", "oom", r->expect_oom, "ok", r->expect_ok, "why",
                                                  r->expect_why)
                                      : json_null());
    if (g->kind == REPORT_FIT)
        json_object_set_new(v, "fit",
                            json_pack("{s:s, s:i, s:i, s:b, s:f}", "param", g->fit_param,
                                      g->fit_smallest ? "smallest" : "largest", g->fits[i].largest,
                                      "probes", g->fits[i].probes, "hit_limit", g->fits[i].hit_limit, "margin",
                                      g->fit_margin));
    json_object_set_new(v, "replay", g->kind == REPORT_REPLAY ? replay_json(r) : json_null());
    if (g->kind == REPORT_STRESS) /* only in stress documents, so run's stay as they were */
        json_object_set_new(v, "stress", stress_json(&g->stress[i]));
    json_object_set_new(v, "failed", json_boolean(report_job_failed(g, i)));
    return v;
}

void report_json_add(json_t *groups, const struct report_group *g)
{
    static const char *const kinds[] = {"scenario", "replay", "fit", "stress"};
    json_t *s = json_object();
    json_object_set_new(s, "kind", json_string(kinds[g->kind]));
    json_object_set_new(s, "name", json_string(g->name));
    json_object_set_new(s, "title", g->title ? json_string(g->title) : json_null());
    json_object_set_new(s, "source", g->source ? json_string(g->source) : json_null());
    json_object_set_new(s, "file", g->file ? json_string(g->file) : json_null());
    json_t *jobs = json_array();
    for (size_t i = 0; i < g->njobs; i++)
        json_array_append_new(jobs, job_json(g, i));
    json_object_set_new(s, "jobs", jobs);
    json_array_append_new(groups, s);
}

json_t *report_json_document(const char *command, json_t *groups)
{
    return json_pack("{s:s, s:i, s:s, s:o}", "schema", "oomlab-results", "schema_version", RESULTS_SCHEMA_VERSION,
                     "command", command, "groups", groups);
}
