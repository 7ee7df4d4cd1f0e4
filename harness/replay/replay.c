/* replay.c: a replay is a trace's ops through the one runner (see replay.h). A snapshot's run starts
 * from its rebuilt initial state, with a recorded_observer holding it to what was recorded; a text trace
 * streams into the runner as it is read. OOMs do not end a replay: the allocation is reported and does
 * not exist afterwards, as in a script that catches the error. */
#include "replay/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_open.h"
#include "device/sim.h"
#include "replay/recorded.h"
#include "replay/snapshot_plan.h"
#include "replay/trace_input.h"
#include "run/runner.h"

#define DEFAULT_DEVICE "sim:rtx5090"

/* The device, its profile (for a sim roofline) and the runner a replay runs on. */
struct replay_run {
    struct device *dev;
    struct runner *runner;
    struct recorded_observer *check;
};

static int open_run(const struct replay_options *opt, bool snapshot, struct replay_run *rr, struct job_result *out,
                    struct err *e)
{
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    if (alloc_config_parse(&cfg, opt->alloc_conf, e))
        return err_prefix(e, "--alloc-conf: ");
    snprintf(out->alloc_conf, sizeof out->alloc_conf, "%s", cfg.text);
    if (!(rr->dev = device_open(opt->device ? opt->device : DEFAULT_DEVICE, opt->capacity, NULL, e)))
        return -1;
    snprintf(out->device, sizeof out->device, "%s", rr->dev->name);
    out->device_total = rr->dev->total;
    const struct gpu_profile *profile = device_is_sim(rr->dev) ? sim_device_profile(rr->dev) : NULL;
    if (device_is_sim(rr->dev) && !profile)
        profile = gpu_profile_find("rtx5090");
    out->rates_from = profile ? profile->name : NULL;
    struct runner_options ro = {.continue_after_oom = true, .lenient_ids = snapshot,
                                .where_unit = snapshot ? "event" : "line"};
    if (!(rr->runner = runner_create(rr->dev, &cfg, profile, &ro)))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    if (snapshot && (!(rr->check = recorded_observer_create()) ||
                     runner_add_observer(rr->runner, recorded_observer_base(rr->check))))
        return err_set(e, ERR_INTERNAL, "out of host memory");
    return 0;
}

static void close_run(struct replay_run *rr)
{
    runner_destroy(rr->runner);
    recorded_observer_destroy(rr->check);
    if (rr->dev)
        rr->dev->ops->destroy(rr->dev);
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
    int rc = device_is_sim(rr->dev) ? sim_device_force_addresses(rr->dev, addrs, p->ninitial) : 0;
    free(addrs);
    if (rc)
        return err_set(e, ERR_INTERNAL, "out of host memory restoring %zu segments", p->ninitial);
    for (size_t i = 0; i < p->ninitial; i++) {
        const struct replay_segment *s = &p->initial[i];
        uint64_t addr;
        if (runner_restore_segment(rr->runner, s->size, s->stream, s->small, s->blocks, s->keys, s->nblocks, &addr, e))
            return err_prefix(e, "%s: restoring the segment at 0x%llx live at trace start: ", p->name,
                              (unsigned long long)s->address);
        if (recorded_observer_restored(rr->check, s->address, s->size, addr))
            return err_set(e, ERR_INTERNAL, "out of host memory restoring %zu segments", p->ninitial);
    }
    return 0;
}

static int force_recorded_addresses(struct replay_run *rr, const struct snapshot_plan *p, struct err *e)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nops; i++)
        n += p->ops[i].kind == OP_SEGMENT_ALLOC;
    uint64_t *addrs = malloc((n + 1) * sizeof *addrs);
    if (!addrs)
        return err_set(e, ERR_INTERNAL, "out of host memory for %zu recorded segment addresses", n);
    n = 0;
    for (size_t i = 0; i < p->nops; i++)
        if (p->ops[i].kind == OP_SEGMENT_ALLOC)
            addrs[n++] = p->ops[i].id;
    int rc = sim_device_force_addresses(rr->dev, addrs, n);
    free(addrs);
    return rc ? err_set(e, ERR_INTERNAL, "out of host memory for %zu recorded segment addresses", n) : 0;
}

static int finish(struct replay_run *rr, struct job_result *out, struct alloc_snapshot *final, struct err *e)
{
    runner_finish(rr->runner, &out->run);
    job_throughput(out);
    if (final && allocator_snapshot(runner_allocator(rr->runner), final))
        return err_set(e, ERR_INTERNAL, "out of host memory taking the final snapshot");
    return 0;
}

static int replay_snapshot(struct trace_input *in, const struct replay_options *opt, struct job_result *out,
                           struct alloc_snapshot *final, struct err *e)
{
    unsigned char *data;
    size_t len;
    struct snapshot_plan plan;
    if (trace_input_read_all(in, &data, &len, e))
        return -1;
    int rc = snapshot_plan_build(trace_input_name(in), data, len, &plan, e);
    free(data);
    if (rc)
        return -1;
    out->input_kind = "PyTorch snapshot";
    out->rebuilt_start = plan.ninitial > 0;
    struct replay_run rr = {0};
    rc = open_run(opt, true, &rr, out, e);
    if (rc == 0)
        rc = restore_initial(&rr, &plan, e);
    if (rc == 0 && opt->same_addresses && device_is_sim(rr.dev))
        rc = force_recorded_addresses(&rr, &plan, e);
    out->check.recorded_addresses = opt->same_addresses;
    struct op_sink *sink = rc ? NULL : runner_sink(rr.runner);
    for (size_t i = 0; rc == 0 && i < plan.nops; i++)
        if ((rc = sink->emit(sink, &plan.ops[i], e)))
            err_prefix(e, "%s: event %llu: ", plan.name, (unsigned long long)plan.ops[i].where);
    if (rc == 0 && (rc = recorded_observer_finish(rr.check, rr.runner, &plan.final, &out->check, e)) == 0)
        out->checked = true;
    if (rc == 0)
        rc = finish(&rr, out, final, e);
    close_run(&rr);
    snapshot_plan_free(&plan);
    return rc;
}

static int replay_text(struct trace_input *in, const struct replay_options *opt, struct job_result *out,
                       struct alloc_snapshot *final, struct err *e)
{
    out->input_kind = "text trace";
    struct replay_run rr = {0};
    int rc = open_run(opt, false, &rr, out, e);
    if (rc == 0)
        rc = text_trace_run(in, runner_sink(rr.runner), e);
    if (rc == 0)
        rc = finish(&rr, out, final, e);
    close_run(&rr);
    return rc;
}

int replay_path(const char *path, const struct replay_options *opt, struct job_result *out,
                struct alloc_snapshot *final, struct err *e)
{
    *out = (struct job_result){0};
    snprintf(out->group, sizeof out->group, "%s", path);
    snprintf(out->name, sizeof out->name, "replay");
    snprintf(out->fixes, sizeof out->fixes, "-");
    if (final)
        *final = (struct alloc_snapshot){0};
    struct trace_input *in = trace_input_open(path, e);
    if (!in)
        return -1;
    int first = trace_input_peek(in, e);
    int rc = first == -2 ? -1 : first == 0x80 /* pickle PROTO */ ? replay_snapshot(in, opt, out, final, e)
                                                                  : replay_text(in, opt, out, final, e);
    trace_input_close(in);
    if (rc && final)
        alloc_snapshot_free(final);
    return rc;
}
