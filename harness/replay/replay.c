/* replay.c: a replay is a trace's ops through the one runner (see replay.h). A snapshot is read once and
 * each of its devices replayed apart (a plan each, snapshot_plan.h): the run starts from the device's
 * rebuilt initial state, with a recorded_observer holding it to what was recorded; a text trace streams
 * into the runner as it is read. OOMs do not end a replay: the allocation is reported and does
 * not exist afterwards, as in a script that catches the error.
 *
 * Unless told otherwise a replay reproduces the recording: the settings the file recorded, a simulated
 * device with room for everything the recording held, and new segments at the addresses the driver
 * gave (best fit breaks ties by address, so the order is observable). A what-if names another device,
 * capacity or settings; addresses then follow the sim's deterministic policy. */
#include "replay/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_kind.h"
#include "replay/recorded.h"
#include "replay/snapshot_plan.h"
#include "replay/trace_input.h"
#include "report/perfetto.h"
#include "report/plot.h"
#include "report/snapshot_out.h"
#include "run/runner.h"
#include "run/timeline.h"

#define UNBOUNDED (1ULL << 50) /* 1 PiB: more than any recording holds */

/* What one run of a replay is set up with. */
struct setup {
    bool stop_at_oom;
    struct alloc_config cfg;
    const char *device;
    struct capacity capacity;
    bool recorded_addresses;
    int device_index;  /* the recorded GPU's number */
    const char *note;  /* a warning the run starts with, or NULL */
};

struct replay_run {
    struct device *dev;
    struct runner *runner;
    struct recorded_observer *check;
    struct snapshot_recorder *snapshot; /* --snapshot */
    struct holders *holders;
    struct timeline *timeline;          /* --plot, --perfetto */
};

/* outputs: the files the run is written to (NULL: none, a run that only measures). */
static int open_run(const struct setup *su, bool snapshot, const struct replay_options *outputs,
                    struct replay_run *rr, struct job_result *out, struct err *e)
{
    bool record = outputs && outputs->snapshot_path, draw = outputs && (outputs->plot_dir || outputs->perfetto_path);
    if (!(rr->dev = device_open(su->device, &(struct device_open_options){.capacity = su->capacity}, e)))
        return -1;
    if (su->capacity.bytes == UNBOUNDED)
        snprintf(out->device, sizeof out->device, "sim:unbounded");
    else
        snprintf(out->device, sizeof out->device, "%s", rr->dev->name);
    out->device_total = rr->dev->total;
    snprintf(out->device_detail, sizeof out->device_detail, "%s", rr->dev->detail);
    snprintf(out->timed_by, sizeof out->timed_by, "%s", rr->dev->timed_by);
    struct runner_options ro = {.continue_after_oom = !su->stop_at_oom, .lenient_ids = snapshot,
                                .where_unit = snapshot ? "event" : "line", .device_index = su->device_index};
    if (!(rr->runner = runner_create(rr->dev, &su->cfg, &ro)))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    if (su->note)
        runner_warn(rr->runner, "%s", su->note);
    if (snapshot && (!(rr->check = recorded_observer_create()) ||
                     runner_add_observer(rr->runner, recorded_observer_base(rr->check))))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    if (record && (!(rr->snapshot = snapshot_recorder_create()) ||
                   runner_add_observer(rr->runner, snapshot_recorder_base(rr->snapshot))))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    if (!(rr->holders = holders_create()) || runner_add_observer(rr->runner, holders_base(rr->holders)))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    if (draw && (!(rr->timeline = timeline_create(TIMELINE_POINTS)) ||
                 timeline_attach(rr->timeline, rr->runner)))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    return 0;
}

static void close_run(struct replay_run *rr)
{
    runner_destroy(rr->runner);
    recorded_observer_destroy(rr->check);
    snapshot_recorder_destroy(rr->snapshot);
    holders_destroy(rr->holders);
    timeline_destroy(rr->timeline);
    if (rr->dev)
        rr->dev->ops->destroy(rr->dev);
    *rr = (struct replay_run){0};
}

static uint64_t plan_reserved_at_start(const struct snapshot_plan *p)
{
    uint64_t n = 0;
    for (size_t i = 0; i < p->ninitial; i++)
        n += p->initial[i].size;
    for (size_t i = 0; i < p->ninitial_expandable; i++)
        for (size_t k = 0; k < p->initial_expandable[i].nranges; k++)
            n += p->initial_expandable[i].ranges[k].size;
    return n;
}

/* A restore that failed for want of device memory, said in one line with what the start needs. */
static int too_small_for_start(const struct replay_run *rr, const struct snapshot_plan *p, struct err *e)
{
    char need[32], have[32], flag[32];
    size_format_pytorch(plan_reserved_at_start(p), need, sizeof need);
    size_format_pytorch(rr->dev->total, have, sizeof have);
    size_format_flag(plan_reserved_at_start(p), flag, sizeof flag);
    return err_set(e, ERR_INPUT,
                   "%s: the state at trace start holds %s reserved, more than %s has (%s): replay without "
                   "--device/--capacity to reproduce the recording, or give --capacity %s or more",
                   p->name, need, rr->dev->name, have, flag);
}

static int restore_expandable(struct replay_run *rr, const struct snapshot_plan *p, struct err *e)
{
    for (size_t i = 0; i < p->ninitial_expandable; i++) {
        const struct replay_expandable *x = &p->initial_expandable[i];
        uint64_t base;
        struct err why = {0};
        if (runner_restore_expandable(rr->runner, x->stream, x->small, x->ranges, x->nranges, x->blocks, x->keys,
                                      x->sites, x->nblocks, &base, &why)) {
            if (why.code == ERR_INPUT && strstr(why.msg, "cannot"))
                return too_small_for_start(rr, p, e);
            return *e = why, err_prefix(e, "%s: restoring the expandable segment at 0x%llx live at trace start: ",
                                        p->name, (unsigned long long)x->rec_base);
        }
        if (recorded_observer_restored_reservation(rr->check, x->stream, x->small, x->rec_base, base))
            return err_set(e, ERR_INTERNAL, "out of host memory restoring an expandable segment");
    }
    return 0;
}

/* The state at trace start, each segment at its recorded address. */
static int restore_initial(struct replay_run *rr, const struct snapshot_plan *p, struct err *e)
{
    if (!p->ninitial)
        return 0;
    uint64_t *addrs = malloc(p->ninitial * sizeof *addrs);
    if (!addrs)
        return err_set(e, ERR_INTERNAL, "out of host memory restoring %zu segments", p->ninitial);
    for (size_t i = 0; i < p->ninitial; i++)
        addrs[i] = p->initial[i].address;
    int rc = rr->dev->ops->place_next ? rr->dev->ops->place_next(rr->dev, addrs, p->ninitial, e) : 0;
    free(addrs);
    if (rc)
        return -1;
    for (size_t i = 0; i < p->ninitial; i++) {
        const struct replay_segment *s = &p->initial[i];
        uint64_t addr;
        struct err why = {0};
        if (runner_restore_segment(rr->runner, s->size, s->stream, s->small, s->blocks, s->keys, s->sites, s->nblocks,
                                   &addr, &why)) {
            if (why.code != ERR_INPUT || !strstr(why.msg, "cannot hold"))
                return *e = why, err_prefix(e, "%s: restoring the segment at 0x%llx live at trace start: ", p->name,
                                            (unsigned long long)s->address);
            return too_small_for_start(rr, p, e);
        }
        if (recorded_observer_restored(rr->check, s->address, s->size, addr))
            return err_set(e, ERR_INTERNAL, "out of host memory restoring %zu segments", p->ninitial);
    }
    return 0;
}

static int force_recorded_addresses(struct replay_run *rr, const struct snapshot_plan *p, struct err *e)
{
    size_t n = 0;
    struct op op;
    for (size_t i = 0; i < p->nops; i++)
        n += p->events->events[p->op_events[i]].action == ACT_SEGMENT_ALLOC;
    uint64_t *addrs = malloc((n + 1) * sizeof *addrs);
    if (!addrs)
        return err_set(e, ERR_INTERNAL, "out of host memory for %zu recorded segment addresses", n);
    n = 0;
    for (size_t i = 0; i < p->nops; i++)
        if (p->events->events[p->op_events[i]].action == ACT_SEGMENT_ALLOC) {
            snapshot_plan_op(p, i, &op);
            addrs[n++] = op.id;
        }
    int rc = rr->dev->ops->place_next(rr->dev, addrs, n, e);
    free(addrs);
    return rc;
}

/* --plot DIR: DIR/NAME-timeline and -segments, NAME the replayed file's name without extensions. */
static int write_pictures(struct replay_run *rr, const struct job_result *out, const struct replay_options *o,
                          struct err *e)
{
    timeline_finish(rr->timeline);
    if (o->plot_dir) {
        const char *slash = strrchr(out->group, '/');
        char stem[256];
        snprintf(stem, sizeof stem, "%s", !strcmp(out->group, "-") ? "stdin" : slash ? slash + 1 : out->group);
        static const char *const exts[] = {".gz", ".pickle", ".pkl", ".txt", ".trace"};
        for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) { /* in the order they are stacked */
            size_t n = strlen(stem), k = strlen(exts[i]);
            if (n > k && !strcmp(stem + n - k, exts[i]))
                stem[n - k] = '\0';
        }
        if (strcmp(out->name, "replay")) { /* one of several devices: "device 1" -> STEM-device-1 */
            size_t n = strlen(stem);
            snprintf(stem + n, sizeof stem - n, "-%s", out->name);
            for (char *c = stem + n; *c; c++)
                *c = *c == ' ' ? '-' : *c;
        }
        if (plot_run_write(o->plot_dir, stem, rr->timeline, out, e))
            return -1;
    }
    return o->perfetto_path ? perfetto_write(o->perfetto_path, rr->timeline, out, e) : 0;
}

static int finish(struct replay_run *rr, struct job_result *out, const struct replay_options *outputs, struct err *e)
{
    runner_finish(rr->runner, &out->run);
    job_throughput(out);
    if (holders_finish(rr->holders, &out->holders))
        return err_set(e, ERR_INTERNAL, "out of host memory following what holds the memory");
    if (rr->snapshot && snapshot_recorder_write(rr->snapshot, rr->runner, outputs->snapshot_path, e))
        return -1;
    return rr->timeline ? write_pictures(rr, out, outputs, e) : 0;
}

static int run_plan(const struct snapshot_plan *plan, const struct setup *su, struct job_result *out,
                    const struct replay_options *outputs, struct err *e)
{
    struct replay_run rr = {0};
    int rc = open_run(su, true, outputs, &rr, out, e);
    if (rc == 0)
        rc = restore_initial(&rr, plan, e);
    if (rc == 0)
        rc = restore_expandable(&rr, plan, e);
    if (rc == 0 && su->recorded_addresses && rr.dev->ops->place_next)
        rc = force_recorded_addresses(&rr, plan, e);
    struct op_sink *sink = rc ? NULL : runner_sink(rr.runner);
    struct op op;
    for (size_t i = 0; rc == 0 && i < plan->nops && !runner_stopped_by_oom(rr.runner); i++) {
        snapshot_plan_op(plan, i, &op);
        if ((rc = sink->emit(sink, &op, e)) && !runner_stopped_by_oom(rr.runner))
            err_prefix(e, "%s: event %llu: ", plan->name, (unsigned long long)op.where);
    }
    if (runner_stopped_by_oom(rr.runner))
        rc = 0; /* the OOM is the result */
    if (rc == 0 &&
        (rc = recorded_observer_finish(rr.check, rr.runner, plan->final, plan->nfinal, &out->replay.check, e)) == 0)
        out->replay.checked = true;
    if (rc == 0)
        rc = finish(&rr, out, outputs, e);
    close_run(&rr);
    return rc;
}

static int run_text(struct trace_input *in, const struct setup *su, struct job_result *out,
                    const struct replay_options *outputs, struct err *e)
{
    struct replay_run rr = {0};
    int rc = open_run(su, false, outputs, &rr, out, e);
    if (rc == 0 && (rc = text_trace_run(in, runner_sink(rr.runner), e)) && runner_stopped_by_oom(rr.runner))
        rc = 0; /* the OOM is the result */
    if (rc == 0)
        rc = finish(&rr, out, outputs, e);
    close_run(&rr);
    return rc;
}

/* The settings, device and address policy of a replay, and why (into out->replay). */
static int decide(const struct replay_options *opt, const struct snapshot_plan *plan, struct setup *su,
                  struct job_result *out, struct err *e)
{
    struct replay_info *ri = &out->replay;
    *su = (struct setup){.stop_at_oom = opt->stop_at_oom};
    alloc_config_default(&su->cfg);
    if (opt->alloc_conf) {
        if (alloc_config_parse(&su->cfg, opt->alloc_conf, e))
            return err_prefix(e, "--alloc-conf: ");
        snprintf(ri->settings_from, sizeof ri->settings_from, "%s%s",
                 opt->alloc_conf_from ? opt->alloc_conf_from : "--alloc-conf",
                 plan ? " (a what-if: not the recorded settings)" : "");
    } else if (plan && plan->has_settings) {
        su->cfg = plan->settings;
        snprintf(ri->settings_from, sizeof ri->settings_from, "recorded in the snapshot");
    } else if (opt->env_alloc_conf) {
        if (alloc_config_parse(&su->cfg, opt->env_alloc_conf, e))
            return err_prefix(e, "$%s: ", opt->env_name);
        snprintf(ri->settings_from, sizeof ri->settings_from, "$%s%s", opt->env_name,
                 plan ? " (the snapshot records no settings)" : "");
    } else {
        snprintf(ri->settings_from, sizeof ri->settings_from, "PyTorch's defaults%s",
                 plan ? " (the snapshot records no settings)" : "");
    }
    snprintf(out->alloc_conf, sizeof out->alloc_conf, "%s", su->cfg.text);
    bool bounded = opt->device || opt->capacity.bytes || opt->capacity.fraction > 0.0;
    su->device = opt->device ? opt->device : bounded ? DEVICE_DEFAULT : "sim";
    su->capacity = bounded ? opt->capacity : (struct capacity){UNBOUNDED, 0.0};
    snprintf(ri->capacity_from, sizeof ri->capacity_from, "%s",
             bounded ? "as named (a what-if)" : "unbounded: room for everything the recording held");
    bool what_if = opt->alloc_conf || bounded;
    ri->what_if = what_if;
    su->recorded_addresses = plan && (opt->addresses == ADDRESSES_RECORDED ||
                                      (opt->addresses == ADDRESSES_AUTO && !what_if));
    snprintf(ri->addresses, sizeof ri->addresses, "%s",
             !plan ? "the sim's deterministic policy (a text trace records none)"
             : su->recorded_addresses ? "where the driver put them (recorded segment_alloc addresses)"
                                      : "the sim's deterministic policy (first at 2^40, each above the last)");
    return 0;
}

/* A job of the replayed file at path. */
static void start_job(struct job_result *out, const char *path, const char *name)
{
    *out = (struct job_result){0};
    snprintf(out->group, sizeof out->group, "%s", path);
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->fixes, sizeof out->fixes, "-");
}

/* Replays one device's plan into out: its settings, device and address policy, the run, and the capacity
 * it would have needed. */
static int replay_plan(const struct snapshot_plan *plan, const struct replay_options *opt, const char *note,
                       struct job_result *out, struct err *e)
{
    out->replay.input_kind = "PyTorch snapshot";
    out->replay.rebuilt_start = plan->ninitial > 0 || plan->ninitial_expandable > 0;
    out->replay.inferred_sizes = plan->inferred_sizes;
    out->replay.start_reserved = plan_reserved_at_start(plan);
    out->replay.private_pool_segments = plan->private_pool_segments;
    struct setup su;
    int rc = decide(opt, plan, &su, out, e);
    su.device_index = plan->device;
    su.note = note;
    if (rc == 0)
        rc = run_plan(plan, &su, out, opt, e);
    if (rc == 0 && out->run.nooms && su.capacity.bytes != UNBOUNDED) {
        /* what it would have needed: the same run with room to spare */
        struct job_result *big = calloc(1, sizeof *big);
        struct setup wide = su;
        wide.device = "sim";
        wide.capacity = (struct capacity){UNBOUNDED, 0.0};
        wide.note = NULL;
        if (big && run_plan(plan, &wide, big, NULL, &(struct err){0}) == 0)
            out->replay.needed = big->run.peak_reserved;
        free(big);
    } else if (rc == 0) {
        out->replay.needed = out->run.peak_reserved;
    }
    return rc;
}

/* "0, 1 and 3": the devices of s that have (want true) or lack something to replay. */
static size_t device_list(const struct snapshot *s, bool want, char *buf, size_t len)
{
    size_t n = 0, at = 0, total = 0;
    for (size_t i = 0; i < s->ndevices; i++)
        total += snapshot_device_replayable(&s->devices[i]) == want;
    buf[0] = '\0';
    for (size_t i = 0; i < s->ndevices && at < len; i++) {
        if (snapshot_device_replayable(&s->devices[i]) != want)
            continue;
        n++;
        const char *sep = n == 1 ? "" : n == total ? " and " : ", ";
        at += (size_t)snprintf(buf + at, len - at, "%s%d", sep, s->devices[i].device);
    }
    return total;
}

/* The devices of s to replay (the one --cuda-device names, else each with something to replay; none: an
 * empty device 0, NULL), whether the file has several to replay, and the note naming those with nothing
 * to replay. */
static int pick_devices(const char *name, const struct snapshot *s, const struct replay_options *opt,
                        const struct snapshot_device **picks, size_t *n, bool *several, char *note, size_t len,
                        struct err *e)
{
    char list[256];
    size_t with = device_list(s, true, list, sizeof list);
    *several = with > 1;
    *n = 0;
    note[0] = '\0';
    if (opt->one_device) {
        const struct snapshot_device *d = snapshot_device(s, opt->cuda_device);
        if (!d || !snapshot_device_replayable(d))
            return err_set(e, ERR_INPUT, "%s: --cuda-device %d: the file has nothing to replay on device %d (%s%s)",
                           name, opt->cuda_device, opt->cuda_device,
                           with ? (with == 1 ? "it has something on device " : "it has something on devices ")
                                : "no device has segments or allocator events", list);
        picks[(*n)++] = d;
        return 0;
    }
    for (size_t i = 0; i < s->ndevices; i++)
        if (snapshot_device_replayable(&s->devices[i]))
            picks[(*n)++] = &s->devices[i];
    size_t without = device_list(s, false, list, sizeof list);
    if (without)
        snprintf(note, len, "device%s %s: nothing to replay (no segments, and the trace holds no allocator event: "
                            "only snapshot markers or actions oomlab does not replay)", without == 1 ? "" : "s", list);
    else if (!*n)
        snprintf(note, len, "the snapshot records nothing to replay: no segments and no trace events");
    if (!*n)
        picks[(*n)++] = NULL;
    return 0;
}

static int replay_snapshot(const char *path, struct trace_input *in, const struct replay_options *opt,
                           struct job_result **jobs, size_t *njobs, struct err *e)
{
    const char *name = trace_input_name(in);
    const unsigned char *data;
    size_t len, n = 0;
    struct snapshot s;
    if (trace_input_read_all(in, &data, &len, e) || snapshot_parse(name, data, len, &s, e))
        return -1;
    int rc;
    char note[512];
    bool several = false;
    const struct snapshot_device **picks = malloc((s.ndevices + 1) * sizeof *picks);
    rc = picks ? pick_devices(name, &s, opt, picks, &n, &several, note, sizeof note, e)
               : err_set(e, ERR_INTERNAL, "out of host memory");
    if (rc == 0 && n > 1 && (opt->snapshot_path || opt->perfetto_path))
        rc = err_set(e, ERR_INPUT, "%s: %s writes one device's replay, and the file has %zu devices to replay: "
                                   "pick one with --cuda-device N", name,
                     opt->snapshot_path ? "--snapshot" : "--perfetto", n);
    if (rc == 0 && !(*jobs = calloc(n, sizeof **jobs)))
        rc = err_set(e, ERR_INTERNAL, "out of host memory");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct snapshot_device *d = picks[i];
        char plan_name[4096 + 32], job_name[32];
        snprintf(plan_name, sizeof plan_name, several ? "%s, device %d" : "%s", name, d ? d->device : 0);
        snprintf(job_name, sizeof job_name, several ? "device %d" : "replay", d ? d->device : 0);
        start_job(&(*jobs)[i], path, job_name);
        struct snapshot_plan plan;
        if ((rc = snapshot_plan_build(plan_name, &s, d, &plan, e)) == 0) {
            rc = replay_plan(&plan, opt, i == 0 && note[0] ? note : NULL, &(*jobs)[i], e);
            snapshot_plan_free(&plan);
        }
        *njobs = i + 1;
    }
    free(picks);
    snapshot_free(&s);
    return rc;
}

static int replay_text(const char *path, struct trace_input *in, const struct replay_options *opt,
                       struct job_result *out, struct err *e)
{
    if (opt->one_device)
        return err_set(e, ERR_INPUT, "%s: --cuda-device picks a device of a PyTorch snapshot; a text trace has one",
                       trace_input_name(in));
    out->replay.input_kind = "text trace";
    struct setup su;
    int rc = decide(opt, NULL, &su, out, e);
    if (rc == 0)
        rc = run_text(in, &su, out, opt, e);
    if (rc || !out->run.nooms || su.capacity.bytes == UNBOUNDED) {
        out->replay.needed = rc || out->run.nooms ? 0 : out->run.peak_reserved;
        return rc;
    }
    /* what it would have needed: the same run with room to spare (standard input cannot be read twice) */
    struct trace_input *again = strcmp(path, "-") ? trace_input_open(path, &(struct err){0}) : NULL;
    struct job_result *big = again ? calloc(1, sizeof *big) : NULL;
    su.device = "sim";
    su.capacity = (struct capacity){UNBOUNDED, 0.0};
    if (big && run_text(again, &su, big, NULL, &(struct err){0}) == 0 && !big->run.nooms)
        out->replay.needed = big->run.peak_reserved;
    free(big);
    trace_input_close(again);
    return 0;
}

int replay_path(const char *path, const struct replay_options *opt, struct job_result **jobs, size_t *njobs,
                struct err *e)
{
    *jobs = NULL;
    *njobs = 0;
    struct trace_input *in = trace_input_open(path, e);
    if (!in)
        return -1;
    int first = trace_input_peek(in, e), rc = -1;
    if (first == 0x80) { /* pickle PROTO */
        rc = replay_snapshot(path, in, opt, jobs, njobs, e);
    } else if (first != -2 && (*jobs = calloc(1, sizeof **jobs))) {
        *njobs = 1;
        start_job(*jobs, path, "replay");
        rc = replay_text(path, in, opt, *jobs, e);
    } else if (first != -2) {
        err_set(e, ERR_INTERNAL, "out of host memory");
    }
    trace_input_close(in);
    if (rc) {
        free(*jobs);
        *jobs = NULL;
        *njobs = 0;
    }
    return rc;
}
