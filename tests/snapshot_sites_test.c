/* snapshot_sites_test.c: allocation sites from a snapshot's recorded frames reach the replay. The
 * synthetic tests/data/snapshots/sites.pickle (scripts/make-snapshot-fixtures: each stack C++ frames
 * first, then torch's Python, then the user's) reads with every segment, block and event folded to its
 * user frame; its plan names each ALLOC op by its site and gives the block live at trace start its own;
 * the runner keeps a tag per live allocation (a restored block's name, an ALLOC op's name) for observers;
 * and a replay's OOM names the site of the allocation that failed. */
#include "device/device_kind.h"
#include "replay/replay.h"
#include "replay/snapshot_plan.h"
#include "run/runner.h"
#include "tap.h"

#define FIXTURE "tests/data/snapshots/sites.pickle"

static void test_read(const struct snapshot *s)
{
    ok(s->ndevices == 1 && s->nsegments == 2 && s->nevents == 5, "one device, two segments, five events");
    is_str(s->segments[0].site, "train.py:100 main > model.py:12 __init__", "the segment live before recording: its user frame");
    is_str(s->segments[0].blocks[0].site, "train.py:100 main > model.py:12 __init__", "... and its live block's");
    ok(s->segments[0].blocks[1].site == NULL, "a free block has none");
    is_str(s->event_sites[0], "train.py:100 main > train.py:40 step", "alloc C: past 4 C++ frames and torch's module.py");
    is_str(s->event_sites[1], "??:0 torch::unwind::unwind()", "a free that records only C++: its innermost frame");
    ok(s->event_sites[3] && s->event_sites[3] == s->event_sites[4] && s->event_sites[4] == s->segments[1].site,
       "D's segment_alloc, alloc and final segment: one interned site");
    is_str(s->event_sites[4], "train.py:100 main > train.py:77 step", "D's site");
}

static void test_plan(const struct snapshot *s)
{
    struct snapshot_plan p;
    struct err e = {0};
    if (!ok(snapshot_plan_build(FIXTURE, s, &s->devices[0], &p, &e) == 0, "the plan builds")) {
        diag("%s", e.msg);
        return;
    }
    size_t allocs = 0;
    bool named = true;
    for (size_t i = 0; i < p.nops; i++) {
        struct op op;
        snapshot_plan_op(&p, i, &op);
        if (op.kind != OP_ALLOC) {
            named = named && !op.name;
            continue;
        }
        allocs++;
        named = named && op.name == s->event_sites[op.where];
    }
    ok(allocs == 2 && named, "each ALLOC op is named by its event's site, other ops by nothing");
    ok(p.ninitial == 1 && p.initial[0].nblocks == 1 && p.initial[0].sites &&
           p.initial[0].sites[0] == s->segments[0].blocks[0].site,
       "the block live at trace start carries its site");
    ok(p.final == s->devices[0].segments && p.nfinal == 2, "the final segments are the snapshot's own");
    snapshot_plan_free(&p);
}

static void test_runner_tags(void)
{
    struct err e = {0};
    struct device *dev = device_open("sim", &(struct device_open_options){0}, &e);
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    struct runner *r = dev ? runner_create(dev, &cfg, &(struct runner_options){.lenient_ids = true}) : NULL;
    if (!ok(r != NULL, "a runner on sim")) {
        diag("%s", e.msg);
        return;
    }
    const struct restore_block blocks[] = {{0, 4 * MiB, 4 * MiB}, {4 * MiB, 2 * MiB, 2 * MiB}};
    const uint64_t ids[] = {100, 200};
    const char *const names[] = {"model.py:12 __init__", NULL};
    uint64_t addr;
    ok(runner_restore_segment(r, 20 * MiB, 0, false, blocks, ids, names, 2, &addr, &e) == 0, "a segment restored");
    is_str(runner_live_tag(r, 100), "model.py:12 __init__", "a restored block is tagged by its name");
    ok(runner_live_tag(r, 200) == NULL, "... or by nothing");
    ok(runner_restore_segment(r, 20 * MiB, 0, false, blocks, (const uint64_t[]){300, 400}, NULL, 2, &addr, &e) == 0 &&
           runner_live_tag(r, 300) == NULL,
       "names NULL: no tags");
    struct op_sink *sink = runner_sink(r);
    struct op alloc = {.kind = OP_ALLOC, .id = 7, .bytes = MiB, .category = CAT_OTHER, .name = "train.py:40 step"};
    ok(sink->emit(sink, &alloc, &e) == 0, "an alloc runs");
    ok(runner_live_tag(r, 7) == alloc.name, "its tag is the op's name, the same pointer");
    ok(sink->emit(sink, &(struct op){.kind = OP_FREE, .id = 7}, &e) == 0 && runner_live_tag(r, 7) == NULL,
       "freed, it has none");
    ok(runner_live_tag(r, 12345) == NULL, "nothing live under an unknown id");
    runner_destroy(r);
    dev->ops->destroy(dev);
}

/* A replay of the fixture into *job (one job expected); 0 or -1. */
static int replay_fixture(const struct replay_options *opt, struct job_result *job)
{
    struct job_result *jobs;
    size_t n;
    struct err e = {0};
    if (replay_path(FIXTURE, opt, &jobs, &n, &e)) {
        diag("%s", e.msg);
        return -1;
    }
    *job = jobs[0];
    free(jobs);
    return n == 1 ? 0 : -1;
}

static void test_replay(void)
{
    static struct job_result job;
    if (ok(replay_fixture(&(struct replay_options){0}, &job) == 0, "the fixture replays")) {
        const struct recorded_check *c = &job.replay.check;
        ok(c->final_layout_matched && c->addresses_matched == 2 && c->segment_allocs_matched == 1 && !job.run.nooms,
           "exactly, with its block live at trace start restored %s", c->first_mismatch);
    }
    /* 20 MiB held from the start and a 30 MiB segment needed: 40 MiB cannot hold it */
    struct replay_options small = {.capacity = {40 * MiB, 0.0}};
    if (ok(replay_fixture(&small, &job) == 0, "on 40 MiB it replays") && ok(job.run.oom.happened, "and OOMs")) {
        is_str(job.run.oom.tag, "train.py:100 main > train.py:77 step", "the OOM names the site of the allocation that failed");
        is_int(job.run.oom.where, 4, "at event 4");
    }
}

int main(void)
{
    struct snapshot s;
    struct err e = {0};
    if (!ok(snapshot_load(FIXTURE, &s, &e) == 0, "%s loads", FIXTURE)) {
        diag("%s", e.msg);
        return done_testing();
    }
    test_read(&s);
    test_plan(&s);
    snapshot_free(&s);
    test_runner_tags();
    test_replay();
    return done_testing();
}
