/* pipeline_test.c: one pipeline. Every variant of every scenario in scenarios/ is run, its op program is
 * printed as text and replayed through the same runner on the same device: a variant that fits must
 * replay to the same memory_stats (all 122 keys), the same phase peaks and times, the same category
 * breakdown at the peak and the same throughput; one that OOMs must OOM first with the same message. The
 * text read back and printed again must equal what was printed (kernel scalars included).
 * Snapshots out: the run is also written as a PyTorch snapshot (--snapshot), and replaying that file as a
 * user would (no options) must reproduce it exactly: every segment_alloc and segment_map, every address,
 * every final layout, and memory_stats equal. A run that OOMs recorded the request that failed (an oom
 * event): the plain replay tries it with room to spare, where it succeeds, so its stats are compared on
 * the run's own device, where the replay must OOM on it as the run did (retry counters aside: the replay
 * applies a release the run made before a retry from the trace, and needs no retry there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay/replay.h"
#include "replay/trace_input.h"
#include "report/program_text.h"
#include "run/harness.h"
#include "tap.h"
#include "workload/generate.h"

static struct job_result ran, replayed; /* large: not on the stack */

/* Replays path into `replayed`: one job (a text trace, a one-device snapshot); 0, or -1 with e. */
static int replay_one(const char *path, const struct replay_options *opt, struct err *e)
{
    struct job_result *jobs;
    size_t n;
    if (replay_path(path, opt, &jobs, &n, e))
        return -1;
    replayed = jobs[0];
    free(jobs);
    return n == 1 ? 0 : err_set(e, ERR_INTERNAL, "%s: %zu jobs, one expected", path, n);
}

/* memory_stats equal but for the retry counters: where the run released cached memory and retried, the
 * snapshot records the release and the replay applies it from the trace, so it needs no retry there */
static bool same_stats(struct alloc_stats a, struct alloc_stats b)
{
    a.num_alloc_retries = b.num_alloc_retries = 0;
    a.num_sync_all_streams = b.num_sync_all_streams = 0;
    return !memcmp(&a, &b, sizeof a);
}

static void check_snapshot(const struct scenario *sc, const struct variant *v, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s--%s.pickle", dir, sc->name, v->name);
    struct replay_options plain = {0};
    struct err e = {0};
    if (!ok(replay_one(path, &plain, &e) == 0, "%s/%s: its snapshot replays", sc->name, v->name)) {
        diag("%s", e.msg);
        return;
    }
    const struct recorded_check *c = &replayed.replay.check;
    ok(c->segment_allocs_matched == c->segment_allocs_recorded && c->segment_maps_matched == c->segment_maps_recorded &&
           c->addresses_matched == c->allocs && c->final_layout_matched && replayed.run.nooms == 0 &&
           c->ooms_recorded == ran.run.nooms,
       "%s/%s: the snapshot replays exactly (%zu segment_allocs, %zu segment_maps, %zu allocs, %zu OOM) %s", sc->name,
       v->name, c->segment_allocs_recorded, c->segment_maps_recorded, c->allocs, c->ooms_recorded, c->first_mismatch);
    if (ran.run.nooms) { /* on the run's device: the recorded requests OOM again */
        struct replay_options same = {.device = ran.device, .addresses = ADDRESSES_RECORDED};
        if (!ok(replay_one(path, &same, &e) == 0, "%s/%s: its snapshot replays on %s", sc->name, v->name, ran.device)) {
            diag("%s", e.msg);
            return;
        }
        ok(c->ooms_reproduced == ran.run.nooms && c->addresses_matched == c->allocs && c->final_layout_matched,
           "%s/%s: there the replay OOMs on the request the run OOMed on, and stays exact %s", sc->name, v->name,
           c->first_mismatch);
        is_str(replayed.run.ooms[0].message, ran.run.ooms[0].message, "%s/%s: with the run's OOM message", sc->name,
               v->name);
    }
    ok(same_stats(ran.run.stats, replayed.run.stats), "%s/%s: the snapshot replays to the run's memory_stats",
       sc->name, v->name);
}

/* Writes the variant's op program to path (a robust job's: what its run executed, retries included, as
 * `oomlab program` prints it); 0 or -1. */
static int write_program(const struct scenario *sc, const struct variant *v, const struct job_spec *spec,
                         const char *path)
{
    struct job_spec job = *spec; /* the device's cuBLAS workspace, as harness_run_variant settles it */
    struct err oe = {0};
    struct device *dev = harness_open_device(sc, &(struct harness_options){0}, &job, &oe);
    if (!dev)
        return -1;
    dev->ops->destroy(dev);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    struct text_sink sink;
    text_sink_init(&sink, f);
    struct err e = {0};
    static struct job_result r; /* large: not on the stack */
    int rc = job.robust.on_oom != ON_OOM_FAIL
                 ? harness_run_variant(sc, v, NULL, &(struct harness_options){.program_out = f}, &r, &e)
                 : workload_generate(&job, &sink.sink, &e);
    if (rc)
        diag("%s", e.msg);
    return fclose(f) || rc ? -1 : 0;
}

/* Reads a text trace and prints each op again. */
struct echo {
    struct op_sink sink;
    FILE *f;
};

static int echo_op(struct op_sink *s, const struct op *op, struct err *e)
{
    op_print(((struct echo *)s)->f, op);
    return 0;
}

static int files_equal(const char *a, const char *b)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

static void check_variant(const struct scenario *sc, const struct variant *v, const char *dir /* short */)
{
    char prog[64], again[64];
    snprintf(prog, sizeof prog, "%s/program.txt", dir);
    snprintf(again, sizeof again, "%s/again.txt", dir);
    struct harness_options hopt = {.snapshot_dir = dir};
    struct err e = {0};
    if (!ok(harness_run_variant(sc, v, NULL, &hopt, &ran, &e) == 0, "%s/%s runs", sc->name, v->name)) {
        diag("%s", e.msg);
        return;
    }
    check_snapshot(sc, v, dir);
    struct job_spec job = v->job;
    job.parallel.pipeline_stage = ran.pipe_shown; /* a pipeline: the stage the run's figures are */
    if (!ok(write_program(sc, v, &job, prog) == 0, "%s/%s: program written", sc->name, v->name))
        return;
    /* the text read back and printed again is the same text */
    struct trace_input *in = trace_input_open(prog, &e);
    FILE *f = fopen(again, "w");
    struct echo echo = {{echo_op}, f};
    int rc = in && f ? text_trace_run(in, &echo.sink, &e) : -1;
    trace_input_close(in);
    if (f)
        fclose(f);
    ok(rc == 0 && files_equal(prog, again), "%s/%s: text reads back to itself", sc->name, v->name);

    /* a robust job's program goes on after its OOMs, as its run did */
    const bool robust = v->job.robust.on_oom != ON_OOM_FAIL;
    struct replay_options ropt = {.device = sc->device, .alloc_conf = v->alloc.text, .stop_at_oom = !robust};
    if (!ok(replay_one(prog, &ropt, &e) == 0, "%s/%s: program replays", sc->name, v->name)) {
        diag("%s", e.msg);
        return;
    }
    if (ran.run.oom.happened) {
        ok(replayed.run.oom.happened && !strcmp(ran.run.oom.message, replayed.run.oom.message),
           "%s/%s: the replay OOMs first where the run does", sc->name, v->name);
        ok(!memcmp(&ran.run.stats, &replayed.run.stats, sizeof ran.run.stats),
           "%s/%s: and stopped there, with the run's memory_stats", sc->name, v->name);
        return;
    }
    ok(!memcmp(&ran.run.stats, &replayed.run.stats, sizeof ran.run.stats), "%s/%s: same memory_stats", sc->name,
       v->name);
    ok(ran.run.nphases == replayed.run.nphases &&
           !memcmp(ran.run.phases, replayed.run.phases, ran.run.nphases * sizeof ran.run.phases[0]),
       "%s/%s: same phase peaks and times", sc->name, v->name);
    ok(!memcmp(ran.run.category_at_peak, replayed.run.category_at_peak, sizeof ran.run.category_at_peak),
       "%s/%s: same category breakdown at the peak", sc->name, v->name);
    /* a robust run times the steps of its last attempt only, a pipeline's throughput is all its stages': a
     * replay of one program cannot tell */
    if (!robust && !ran.pipe_stages)
        ok(ran.steps_per_s == replayed.steps_per_s && ran.samples_per_s == replayed.samples_per_s,
           "%s/%s: same throughput (%.3f steps/s)", sc->name, v->name, ran.steps_per_s);
}

int main(void)
{
    char dir[] = "/tmp/oomlab-pipeline-XXXXXX";
    if (!mkdtemp(dir))
        tap_skip_all("cannot make a temporary directory");
    struct scenario *sc;
    size_t n;
    struct err e = {0};
    if (!ok(scenario_load_dir_or_file("scenarios", &sc, &n, &e) == 0, "scenarios/ loads"))
        diag("%s", e.msg);
    else {
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < sc[i].nvariants; k++)
                check_variant(&sc[i], &sc[i].variants[k], dir);
        scenario_free_all(sc, n);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd))
        diag("could not remove %s", dir);
    return done_testing();
}
