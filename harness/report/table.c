/* table.c: the human-readable tables: a scenario's before/after table, a replay's summary and check
 * against its recording, and fit's largest values; every figure labelled measured or modelled, every line
 * within 100 columns (long text folds, report/wrap.h). */
#include <string.h>

#include "report/report.h"
#include "report/robust_out.h"
#include "report/stress_out.h"
#include "report/wrap.h"
#include "util/size.h"

#define NAME_W 26 /* a variant's name column */
#define TEXT_COL (4 + NAME_W + 1) /* where a line's text starts after the name */

static const char *figures(const struct job_result *r)
{
    return r->run.measured ? "measured" : "modelled";
}

static void gib(uint64_t n, char *buf, size_t len)
{
    snprintf(buf, len, "%.2f GiB", (double)n / (double)GiB);
}

/* "param 2.95 GiB, activation 27.88 GiB, ..." or "nothing allocated" */
static void category_list(const uint64_t *bytes, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int c = 0; c < CAT_COUNT && at < len; c++) {
        if (!bytes[c])
            continue;
        char s[32];
        size_format_pytorch(bytes[c], s, sizeof s);
        wrap_keep_together(s);
        at += (size_t)snprintf(buf + at, len - at, "%s%s %s", at ? ", " : "", category_name((enum category)c), s);
    }
    if (!at)
        snprintf(buf, len, "nothing allocated");
}

static void print_breakdown(FILE *f, const struct job_result *r)
{
    char first[320], list[512], when[200], text[768];
    snprintf(first, sizeof first, "    %-*s ", NAME_W, r->name);
    snprintf(when, sizeof when, "at peak allocated (%s) in step %lld %s, peak reserved in step %lld %s: ",
             figures(r), (long long)r->run.peak_allocated_step, r->run.peak_allocated_phase,
             (long long)r->run.peak_reserved_step, r->run.peak_reserved_phase);
    category_list(r->run.category_at_peak, list, sizeof list);
    snprintf(text, sizeof text, "%s%s", when, list);
    wrap_print(f, first, TEXT_COL, text);
    if (r->run.oom.happened) {
        snprintf(first, sizeof first, "    %-*s at the OOM in ", NAME_W, "");
        category_list(r->run.oom.category_live, list, sizeof list);
        snprintf(text, sizeof text, "%s: %s", r->run.oom.tag, list);
        wrap_print(f, first, TEXT_COL, text);
    }
}

#define HOLDERS_SHOWN 3 /* per job in the table; JSON has HOLDERS_TOP */

/* The largest holders: at the OOM for a job that OOMs, else at the allocated peak. */
static void print_holders(FILE *f, const struct job_result *r)
{
    const struct holders_view *v = r->run.oom.happened && r->holders.at_oom.seen ? &r->holders.at_oom
                                                                                 : &r->holders.at_peak;
    for (size_t i = 0; i < v->n && i < HOLDERS_SHOWN; i++) {
        const struct holder *h = &v->top[i];
        char first[128], bytes[32], text[320];
        size_format_pytorch(h->bytes, bytes, sizeof bytes);
        snprintf(first, sizeof first, "    %-*s %10s  ", NAME_W, i ? "" : r->name, bytes);
        snprintf(text, sizeof text, "%s in %s: %s (%llu)", category_name((enum category)h->category), h->phase,
                 h->tag, (unsigned long long)h->count);
        wrap_print(f, first, TEXT_COL + 12, text);
    }
}

/* One line per step: the allocated and reserved GiB at the end of each phase. */
static void print_points(FILE *f, const struct job_result *r)
{
    const struct run_result *run = &r->run;
    bool named = false;
    for (size_t i = 0; i < run->npoints;) {
        char first[96], text[1024];
        size_t at = 0;
        int64_t step = run->points[i].step;
        if (step > 0)
            at += (size_t)snprintf(text, sizeof text, "step %lld:", (long long)step);
        for (; i < run->npoints && run->points[i].step == step && at < sizeof text; i++)
            at += (size_t)snprintf(text + at, sizeof text - at, "%s %s\x01%.2f/%.2f",
                                   at ? (step > 0 && text[at - 1] == ':' ? "" : ",") : "",
                                   run->points[i].phase, (double)run->points[i].allocated / (double)GiB,
                                   (double)run->points[i].reserved / (double)GiB);
        snprintf(first, sizeof first, "    %-*s ", NAME_W, named ? "" : r->name);
        named = true;
        wrap_print(f, first, TEXT_COL, text[0] == ' ' ? text + 1 : text);
    }
}

static void print_leaks(FILE *f, const struct job_result *r)
{
    for (size_t i = 0; i < r->holders.nleaks; i++) {
        const struct leak *l = &r->holders.leaks[i];
        char first[96], bytes[32], text[320];
        size_format_pytorch(l->grown, bytes, sizeof bytes);
        wrap_keep_together(bytes);
        snprintf(first, sizeof first, "    %-*s ", NAME_W, i ? "" : r->name);
        snprintf(text, sizeof text, "%s %s grew by %s, at every step from step %lld on",
                 category_name((enum category)l->category), l->tag, bytes, (long long)l->since_step);
        wrap_print(f, first, TEXT_COL, text);
    }
}

/* What the jobs' op programs assumed: the first job's, then any variant's that differs. */
static void print_assumptions(FILE *f, const struct report_group *g)
{
    char first[320] = "", text[320];
    for (size_t i = 0; i < g->njobs; i++) {
        if (!g->jobs[i].has_assumptions)
            continue;
        job_assumptions_text(&g->jobs[i].assumptions, text, sizeof text);
        char lead[96];
        if (i == 0) {
            wrap_print(f, "   assumed: ", 12, strcpy(first, text));
        } else if (strcmp(text, first)) {
            snprintf(lead, sizeof lead, "   assumed by %s: ", g->jobs[i].name);
            wrap_print(f, lead, 12, text);
        }
    }
}

static void print_header(FILE *f, const struct report_group *g)
{
    const struct job_result *r = g->njobs ? &g->jobs[0] : NULL;
    char total[32], head[512], line[768];
    size_format_pytorch(r ? r->device_total : 0, total, sizeof total);
    if (g->kind == REPORT_REPLAY)
        snprintf(head, sizeof head, "replay of a %s", r && r->replay.input_kind ? r->replay.input_kind : "trace");
    snprintf(line, sizeof line, "== %s: ", g->name);
    wrap_print(f, line, 3, g->kind == REPORT_REPLAY ? head : g->title);
    if (g->source)
        wrap_print(f, "   source: ", 11, g->source);
    if (r && !strcmp(r->device, "sim:unbounded"))
        snprintf(line, sizeof line, "%s (modelled by the allocator model)", r->device);
    else
        snprintf(line, sizeof line, "%s (%s%s%s total, %s)", r ? r->device : "-", r ? r->device_detail : "",
                 r && r->device_detail[0] ? "; " : "", total,
                 r && r->run.measured ? "measured" : "modelled by the allocator model");
    wrap_print(f, "   device: ", 11, line);
    print_assumptions(f, g);
}

/* "OOM: backward, step 2" or "fits" (the module is in the breakdown) */
static void outcome_short(const struct report_group *g, const struct job_result *r, char *buf, size_t len)
{
    if (!r->run.oom.happened)
        snprintf(buf, len, "fits");
    else
        snprintf(buf, len, "OOM: %s, step %lld", r->run.oom.phase, (long long)r->run.oom.step);
    if (g->kind == REPORT_REPLAY && r->run.nooms > 1)
        snprintf(buf + strlen(buf), len - strlen(buf), " (%llu OOMs)", (unsigned long long)r->run.nooms);
}

static void print_rows(FILE *f, const struct report_group *g)
{
    fprintf(f, "   %-*s %10s %10s %10s %5s  %-6s  %s\n", NAME_W, "variant", "peak alloc", "peak resv", "unalloc@pk",
            "retry", "expect", "result");
    for (size_t i = 0; i < g->njobs; i++) {
        const struct job_result *r = &g->jobs[i];
        char a[32], b[32], u[32], outcome[96];
        gib(r->run.peak_allocated, a, sizeof a);
        gib(r->run.peak_reserved, b, sizeof b);
        gib(r->run.unallocated_at_peak, u, sizeof u);
        outcome_short(g, r, outcome, sizeof outcome);
        fprintf(f, "   %-*s %10s %10s %10s %5lld  %-6s  %s\n", NAME_W, r->name, a, b, u,
                (long long)r->run.stats.num_alloc_retries, !r->has_expect ? "-" : r->expect_ok ? "ok" : "FAILED",
                outcome);
        if (strcmp(r->fixes, "-"))
            wrap_print(f, "     fixes: ", 12, r->fixes);
        if (r->run.managed_peak || r->run.managed_on_host) {
            char m[32], h[32], text[320];
            size_format_pytorch(r->run.managed_peak, m, sizeof m);
            size_format_pytorch(r->run.managed_on_host, h, sizeof h);
            int n = snprintf(text, sizeof text,
                             "%s in unified memory (cudaMallocManaged), outside PyTorch's allocator and its reserved "
                             "memory; modelled resident on the device", m);
            if (r->run.managed_on_host && n > 0 && (size_t)n < sizeof text)
                snprintf(text + n, sizeof text - (size_t)n, "; %s kept on the host for want of room", h);
            wrap_print(f, "     paged: ", 12, text);
        }
        if (r->has_assumptions && r->assumptions.nccl_bytes) {
            char n[32], text[320];
            size_format_pytorch((uint64_t)r->assumptions.nccl_bytes, n, sizeof n);
            snprintf(text, sizeof text, "%s of NCCL's own device buffers over %d channels (modelled), outside "
                     "PyTorch's allocator and its reserved memory", n, r->assumptions.nccl_channels);
            wrap_print(f, "     nccl: ", 12, text);
        }
        if (r->has_expect && !r->expect_ok)
            wrap_print(f, "     expectation failed: ", 7, r->expect_why);
    }
}

static void print_throughput(FILE *f, const struct job_result *r)
{
    char first[96], text[512];
    snprintf(first, sizeof first, "    %-*s ", NAME_W, r->name);
    double eval = 0, prefill = 0;
    uint64_t peak[2] = {0, 0}; /* allocated peaks of prefill and decode */
    bool generates = false; /* job.kind generate: its decode is the text's, not a VAE's */
    for (size_t k = 0; k < r->run.nphases; k++) {
        const struct phase_peak *ph = &r->run.phases[k];
        if (!strcmp(ph->name, "prefill")) {
            generates = true;
            prefill += ph->seconds;
            peak[0] = ph->peak_allocated;
        } else if (phase_is_eval(ph->name)) {
            eval += ph->seconds;
            peak[1] = ph->peak_allocated > peak[1] ? ph->peak_allocated : peak[1];
        }
    }
    if (eval + prefill > 0 && !r->run.oom.happened) {
        char pa[32], pd[32];
        gib(peak[0], pa, sizeof pa);
        gib(peak[1], pd, sizeof pd);
        if (generates)
            snprintf(text, sizeof text,
                     "generate: prefill %.3f s in kernels, peak allocated %s; decode %.3f s, peak allocated %s (%s)",
                     prefill, pa, eval, pd, figures(r));
        else
            snprintf(text, sizeof text, "eval (sampling and decode) %.3f s in kernels (%s)", eval, figures(r));
        wrap_print(f, first, TEXT_COL, text);
    }
    if (r->run.oom.happened)
        snprintf(text, sizeof text, "none: the job OOMs");
    else if (r->steps_per_s <= 0)
        snprintf(text, sizeof text, "none: no training step was timed");
    else if (r->run.measured)
        snprintf(text, sizeof text,
                 "%.3f steps/s, %.2f samples/s (measured: median of %lld steps' training kernels by %s, %.3f s; "
                 "range %.3f-%.3f s; wall clock %.3f s, range %.3f-%.3f s)",
                 r->steps_per_s, r->samples_per_s, (long long)r->run.steps_timed, r->timed_by,
                 r->run.step_seconds_median, r->run.step_seconds_min, r->run.step_seconds_max,
                 r->run.step_wall_seconds_median, r->run.step_wall_seconds_min, r->run.step_wall_seconds_max);
    else
        snprintf(text, sizeof text, "%.3f steps/s, %.2f samples/s (modelled: %s, %.2f\x01TFLOP per step)",
                 r->steps_per_s, r->samples_per_s, r->timed_by,
                 r->steps_planned ? r->train_flops / 1e12 / r->steps_planned
                                  : r->train_flops / 1e12 / (double)r->run.steps);
    wrap_print(f, first, TEXT_COL, text);
}

static void print_device_growth(FILE *f, const struct job_result *r)
{
    char first[192], text[1024];
    size_t at = 0;
    snprintf(first, sizeof first, "    %-*s device memory growth in each phase's first run (measured, total - free): ",
             NAME_W, r->name);
    text[0] = '\0';
    for (size_t k = 0; k < r->run.nphases && at < sizeof text; k++) {
        int64_t d = r->run.phases[k].device_used_delta;
        char s[32];
        size_format_pytorch((uint64_t)(d < 0 ? -d : d), s, sizeof s);
        wrap_keep_together(s);
        at += (size_t)snprintf(text + at, sizeof text - at, "%s%s %c%s", k ? ", " : "", r->run.phases[k].name,
                               d < 0 ? '-' : '+', s);
    }
    wrap_print(f, first, TEXT_COL, text);
}

/* "+63.0%", or "none before" when it was 0 */
static void share_change(uint64_t now, uint64_t was, char *buf, size_t len)
{
    if (was)
        snprintf(buf, len, "%+.1f%%", 100.0 * ((double)now / (double)was - 1));
    else
        snprintf(buf, len, "none recorded");
}

static void print_check(FILE *f, const struct recorded_check *c, bool what_if)
{
    fprintf(f, "   check against the snapshot:\n");
    fprintf(f, "    segment_allocs   %zu/%zu matched (size and place in the event order)\n", c->segment_allocs_matched,
            c->segment_allocs_recorded);
    if (c->segment_maps_recorded) {
        char text[160];
        snprintf(text, sizeof text, "%zu/%zu matched (expandable segments: size and place; addresses by their offset "
                                    "in each stream's reservation)",
                 c->segment_maps_matched, c->segment_maps_recorded);
        wrap_print(f, "    segment_maps     ", 21, text);
    }
    if (c->final_layout_matched)
        fprintf(f, "    final layout     every segment's blocks match\n");
    else
        fprintf(f, "    final layout     %zu/%zu segments laid out alike\n", c->final_segments_matched,
                c->final_segments);
    fprintf(f, "    alloc addresses  %zu/%zu matched\n", c->addresses_matched, c->allocs);
    if (c->ooms_recorded) {
        char ooms[200];
        snprintf(ooms, sizeof ooms, "%zu/%zu of the recording's OOMs happen here too%s", c->ooms_reproduced,
                 c->ooms_recorded, c->ooms_reproduced == c->ooms_recorded ? ""
                 : what_if ? " (the other requests succeed under the what-if)"
                           : " (the other requests succeed with the room this replay has)");
        wrap_print(f, "    OOMs             ", 21, ooms);
    }
    char rr[32], ra[32], pr[32], pa[32], text[320];
    size_format_pytorch(c->recorded_reserved, rr, sizeof rr);
    size_format_pytorch(c->recorded_allocated, ra, sizeof ra);
    size_format_pytorch(c->replayed_reserved, pr, sizeof pr);
    size_format_pytorch(c->replayed_allocated, pa, sizeof pa);
    char dr[24], da[24];
    share_change(c->replayed_reserved, c->recorded_reserved, dr, sizeof dr);
    share_change(c->replayed_allocated, c->recorded_allocated, da, sizeof da);
    if (replay_drifted(c))
        snprintf(text, sizeof text, "recorded %s reserved, %s allocated; replayed %s reserved (%s), %s allocated (%s)%s",
                 rr, ra, pr, dr, pa, da, what_if ? " under the what-if" : ": the replay drifted from the recording");
    else
        snprintf(text, sizeof text, "recorded %s reserved, %s allocated; replayed the same", rr, ra);
    wrap_print(f, "    at the end       ", 21, text);
    if (c->first_mismatch[0])
        wrap_print(f, "    first mismatch   ", 21, c->first_mismatch);
}

/* A replay's OOMs with their position, its warnings, and how it matched its recording. */
static void print_replay_details(FILE *f, const struct job_result *r)
{
    const struct run_result *run = &r->run;
    const struct replay_info *ri = &r->replay;
    size_t shown = run->nooms < RUN_MAX_OOMS ? (size_t)run->nooms : RUN_MAX_OOMS;
    const char *unit = ri->checked ? "event" : "line";
    char first[64], text[768], need[32];
    for (size_t i = 0; i < shown; i++) {
        snprintf(first, sizeof first, "   OOM at %s %llu: ", unit, (unsigned long long)run->ooms[i].where);
        wrap_print(f, first, 6, run->ooms[i].message);
    }
    if (run->nooms > shown)
        fprintf(f, "   ... and %llu more OOMs (memory_stats num_ooms counts them all)\n",
                (unsigned long long)(run->nooms - shown));
    size_t nwarn = run->nwarnings < RUN_MAX_WARNINGS ? (size_t)run->nwarnings : RUN_MAX_WARNINGS;
    for (size_t i = 0; i < nwarn; i++)
        wrap_print(f, "   warning: ", 6, run->warnings[i]);
    if (run->nwarnings > nwarn)
        fprintf(f, "   ... and %llu more warnings\n", (unsigned long long)(run->nwarnings - nwarn));
    snprintf(text, sizeof text, "%s: %s", ri->settings_from, r->alloc_conf[0] ? r->alloc_conf : "(PyTorch defaults)");
    wrap_print(f, "   settings:  ", 14, text);
    size_format_pytorch(ri->needed, need, sizeof need);
    snprintf(text, sizeof text, "%s%s%s%s", ri->capacity_from, ri->needed ? "; the trace holds in " : "",
             ri->needed ? need : "", ri->needed ? " reserved at its peak" : "");
    wrap_print(f, "   capacity:  ", 14, text);
    if (run->nooms && ri->needed) {
        char flag[32];
        size_format_flag(ri->needed, flag, sizeof flag);
        snprintf(text, sizeof text, "with room to spare the trace reserves %s at its peak: replay without "
                                    "--device/--capacity to reproduce the recording, or give --capacity %s; less "
                                    "can do, as the allocator frees its cache under pressure (`oomlab advise` "
                                    "finds the least)", need, flag);
        wrap_print(f, "   too small: ", 6, text);
    }
    wrap_print(f, "   addresses: ", 14, ri->addresses);
    if (ri->rebuilt_start)
        fprintf(f, "   recording began mid-run: the state at trace start was rebuilt from the file%s\n",
                ri->inferred_sizes ? "" : " (every block size recorded)");
    if (ri->inferred_sizes) {
        snprintf(text, sizeof text, "%zu block size%s at trace start the file no longer holds came from the "
                                    "allocator's split rules and the traced allocations placed above them",
                 ri->inferred_sizes, ri->inferred_sizes == 1 ? "" : "s");
        wrap_print(f, "   ", 3, text);
    }
    if (ri->private_pool_segments) {
        snprintf(text, sizeof text, "%zu segment%s to CUDA graphs' private pools (segment_pool_id other than (0, 0)); "
                                    "oomlab does not model private pools and replays them as segments of the default "
                                    "pools, where PyTorch keeps their blocks apart: placements in them may differ",
                 ri->private_pool_segments, ri->private_pool_segments == 1 ? " belongs" : "s belong");
        wrap_print(f, "   warning: ", 6, text);
    }
    if (ri->checked && !ri->what_if && replay_drifted(&ri->check))
        wrap_print(f, "   warning: ", 6,
                   "the replay does not end where the recording did (see \"at the end\" below): its figures "
                   "are the model's, not the recording's");
    if (ri->checked)
        print_check(f, &ri->check, ri->what_if);
}

static void print_fit(FILE *f, const struct report_group *g)
{
    const struct job_result *first = g->njobs ? &g->jobs[0] : NULL;
    char head[512], margin[64] = "";
    if (g->fit_margin > 0)
        snprintf(margin, sizeof margin, " with %g%% of the device free", g->fit_margin * 100.0);
    snprintf(head, sizeof head, "%s %s that fits%s (%s on %s%s%s)", g->fit_smallest ? "smallest" : "largest",
             g->fit_param, margin,
             first && first->run.measured ? "measured" : "modelled", first ? first->device : "-",
             g->capacity_text ? " with capacity " : "", g->capacity_text ? g->capacity_text : "");
    char line[320];
    snprintf(line, sizeof line, "== %s: ", g->name);
    wrap_print(f, line, 3, head);
    print_assumptions(f, g);
    fprintf(f, "   %-*s %10s %10s  %-26s %6s\n", NAME_W, "variant", g->fit_param, "peak resv", "samples/s", "probes");
    for (size_t i = 0; i < g->njobs; i++) {
        const struct job_result *r = &g->jobs[i];
        const struct fit_row *row = &g->fits[i];
        char resv[32], rate[48], value[24];
        gib(r->run.peak_reserved, resv, sizeof resv);
        if (r->samples_per_s > 0)
            snprintf(rate, sizeof rate, "%.2f (%s)", r->samples_per_s, figures(r));
        else
            snprintf(rate, sizeof rate, "-");
        snprintf(value, sizeof value, "%d%s", row->largest, row->hit_limit ? "+" : "");
        fprintf(f, "   %-*s %10s %10s  %-26s %6d\n", NAME_W, r->name, value, row->largest ? resv : "-",
                row->largest ? rate : "-", row->probes);
        if (strcmp(r->fixes, "-"))
            wrap_print(f, "     fixes: ", 12, r->fixes);
    }
}

void report_table(FILE *f, const struct report_group *g)
{
    if (g->kind == REPORT_FIT) {
        print_fit(f, g);
        return;
    }
    if (g->kind == REPORT_STRESS) {
        stress_table(f, g);
        return;
    }
    print_header(f, g);
    print_rows(f, g);
    fprintf(f, "   breakdown by category:\n");
    for (size_t i = 0; i < g->njobs; i++)
        print_breakdown(f, &g->jobs[i]);
    fprintf(f, "   memory at the end of each phase (allocated/reserved GiB; steps 1, 2 and the last):\n");
    for (size_t i = 0; i < g->njobs; i++)
        print_points(f, &g->jobs[i]);
    fprintf(f, "   largest holders, at the OOM or else at the allocated peak (category in the phase that\n"
               "   allocated it: module or site (live tensors)):\n");
    for (size_t i = 0; i < g->njobs; i++)
        print_holders(f, &g->jobs[i]);
    bool leaks = false;
    for (size_t i = 0; i < g->njobs; i++)
        leaks |= g->jobs[i].holders.nleaks > 0;
    if (leaks) {
        fprintf(f, "   growing step over step:\n");
        for (size_t i = 0; i < g->njobs; i++)
            print_leaks(f, &g->jobs[i]);
    }
    fprintf(f, "   throughput:\n");
    for (size_t i = 0; i < g->njobs; i++)
        print_throughput(f, &g->jobs[i]);
    for (size_t i = 0; i < g->njobs; i++)
        if (g->jobs[i].run.measured)
            print_device_growth(f, &g->jobs[i]);
    for (size_t i = 0; i < g->njobs; i++)
        robust_print(f, &g->jobs[i]);
    for (size_t i = 0; i < g->njobs; i++) {
        char first[96];
        if (g->kind == REPORT_REPLAY) {
            if (g->njobs > 1) /* a snapshot's devices */
                fprintf(f, "   %s:\n", g->jobs[i].name);
            print_replay_details(f, &g->jobs[i]);
        } else if (g->jobs[i].run.oom.happened) {
            snprintf(first, sizeof first, "   %s: ", g->jobs[i].name);
            wrap_print(f, first, 6, g->jobs[i].run.oom.message);
        }
    }
    fprintf(f, "\n");
}
