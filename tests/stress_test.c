/* stress_test.c: every stress profile kind on sim and on host (256 MiB each), with worked numbers: fill's
 * block counts, the OOM storm's returns to its baseline, a soak's steady state (and one that grows), the
 * record_stream rule's cost in reserved memory, a churn drawn from a snapshot's histogram, and that host
 * and sim make the same allocator decisions. */
#include "tap.h"

#include "stress/stress.h"
#include "util/size.h"

#define DATA "tests/data/stress/"

struct outcome {
    struct job_result jobs[STRESS_MAX_SETTINGS];
    struct stress_result res[STRESS_MAX_SETTINGS];
    int n;
};

/* Loads and runs a profile on dev with a 256 MiB capacity; false on any error. */
static bool run(const char *file, const char *dev, struct outcome *o)
{
    static struct stress_profile p;
    struct err e = {0};
    struct stress_options opt = {.device = dev, .capacity = {.bytes = 256 * MiB}};
    bool ok = stress_profile_load(file, &p, &e) == 0 && stress_run(&p, &opt, o->jobs, o->res, &e) == 0;
    if (!ok)
        diag("%s on %s: %s", file, dev, e.msg);
    o->n = p.nsettings;
    stress_profile_free(&p);
    return ok;
}

static bool all_ok(const struct outcome *o)
{
    for (int i = 0; i < o->n; i++)
        for (int k = 0; k < o->res[i].nchecks; k++)
            if (!o->res[i].checks[k].ok) {
                diag("%s: %s: %s", o->jobs[i].name, o->res[i].checks[k].what, o->res[i].checks[k].detail);
                return false;
            }
    return true;
}

static void test_fill(const char *dev)
{
    static struct outcome o;
    /* 20 MiB requests are whole 20 MiB segments: 12 fit in 256 MiB, the 13th finds 16 MiB */
    if (ok(run(DATA "fill_20mib.yaml", dev, &o), "%s: fill 20 MiB runs", dev)) {
        is_u64(o.res[0].blocks, 12, "%s: 12 blocks of 20 MiB", dev);
        is_u64(o.res[0].usable_bytes, 240 * MiB, "%s: 240 MiB usable", dev);
        is_u64(o.res[0].end_reserved, 240 * MiB, "%s: 240 MiB reserved", dev);
        is_u64(o.res[0].oom_request, 20 * MiB, "%s: the 13th request OOMs", dev);
        ok(o.jobs[0].run.measured == !strncmp(dev, "host", 4), "%s: figures say %s", dev,
           o.jobs[0].run.measured ? "measured" : "modelled");
        ok(all_ok(&o), "%s: fill's checks hold", dev);
    }
    /* 1 MiB requests go to the small pool, two to a 2 MiB segment: all 256 MiB */
    if (ok(run(DATA "fill_1mib.yaml", dev, &o), "%s: fill 1 MiB runs", dev)) {
        is_u64(o.res[0].blocks, 256, "%s: 256 blocks of 1 MiB", dev);
        is_u64(o.res[0].end_reserved, 256 * MiB, "%s: every byte reserved", dev);
        ok(all_ok(&o), "%s: checks hold", dev);
    }
}

static void test_oom_storm(const char *dev)
{
    static struct outcome o;
    if (!ok(run(DATA "oom_storm.yaml", dev, &o), "%s: oom_storm runs", dev))
        return;
    is_u64(o.res[0].recoveries, 3, "%s: 3 recoveries", dev);
    is_u64(o.res[0].drifts, 0, "%s: memory_stats back at the baseline each time", dev);
    /* 64 MiB resident: 9 tensors of 20 MiB fit in the 192 MiB left, the 10th OOMs */
    is_u64(o.res[0].ooms, 3, "%s: one OOM per round", dev);
    is_u64(o.jobs[0].run.peak_allocated, 64 * MiB + 9 * 20 * MiB, "%s: peak 64 MiB + 9 x 20 MiB", dev);
    /* resident, empty_cache; 3 x (step, 10 allocations, empty_cache); free, empty_cache */
    is_u64(o.res[0].ops, 2 + 3 * 12 + 2, "%s: 40 ops", dev);
    ok(all_ok(&o), "%s: the storm's checks hold", dev);
}

static void test_streams(const char *dev)
{
    static struct outcome o;
    /* never synchronised: each freed tensor waits, so every production takes a new 20 MiB segment */
    if (ok(run(DATA "streams_nosync.yaml", dev, &o), "%s: streams without sync runs", dev)) {
        is_u64(o.jobs[0].run.peak_reserved, 5 * 20 * MiB, "%s: 5 productions, 5 segments", dev);
        /* after the last free, all five wait for stream 1 */
        is_u64(o.res[0].peak_pending_blocks, 5, "%s: 5 blocks pending at once", dev);
        is_u64(o.res[0].peak_pending_bytes, 100 * MiB, "%s: 100 MiB pending", dev);
        is_u64(o.res[0].record_streams, 5, "%s: 5 record_streams", dev);
        ok(all_ok(&o), "%s: checks hold", dev);
    }
    /* synchronised after every use: a block comes back one production later, so two segments suffice */
    if (ok(run(DATA "streams_sync.yaml", dev, &o), "%s: streams with sync runs", dev)) {
        is_u64(o.jobs[0].run.peak_reserved, 2 * 20 * MiB, "%s: 2 segments", dev);
        /* at the end: the 4th tensor's event is complete but only a malloc would process it, and the 5th's
         * is outstanding */
        is_u64(o.res[0].peak_pending_blocks, 2, "%s: 2 blocks pending at most", dev);
        is_u64(o.res[0].syncs, 6, "%s: 5 syncs, and the final one", dev);
        ok(all_ok(&o), "%s: checks hold", dev);
    }
}

static void test_soak(const char *dev)
{
    static struct outcome o;
    if (ok(run(DATA "soak.yaml", dev, &o), "%s: soak runs", dev)) {
        is_int(o.res[0].steps_run, 12, "%s: 12 steps", dev);
        is_u64(o.res[0].invariant_checks, 12, "%s: invariants checked at each", dev);
        is_int(o.res[0].allocated_growth, 0, "%s: no growth", dev);
        ok(all_ok(&o), "%s: steady after the warm-up", dev);
    }
    /* zero_grad(set_to_none=False) and every loss kept: one 512-byte block more at each step's end */
    if (ok(run(DATA "soak_growing.yaml", dev, &o), "%s: the growing soak runs", dev)) {
        is_int(o.res[0].allocated_growth, 5 * 512, "%s: +512 bytes a step over the 5 steps after step 3", dev);
        ok(!all_ok(&o), "%s: its steady-state check fails", dev);
    }
}

static void test_churn(void)
{
    static struct outcome sim, host, again;
    if (!ok(run(DATA "churn.yaml", "sim", &sim) && run(DATA "churn.yaml", "host", &host), "churn on sim and host"))
        return;
    is_int(sim.n, 2, "two settings side by side");
    ok(all_ok(&sim) && all_ok(&host), "invariants hold at every point on both");
    ok(sim.res[0].npoints == 6 && sim.res[0].points[5].op == 3000, "6 points, the last at op 3000");
    bool same = true;
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < sim.res[i].npoints; k++)
            same &= !memcmp(&sim.res[i].points[k], &host.res[i].points[k], sizeof sim.res[i].points[k]);
    ok(same, "host makes the allocator decisions sim makes: every point equal");
    ok(run(DATA "churn.yaml", "sim", &again) && !memcmp(again.res, sim.res, sizeof sim.res[0] * 2),
       "the same seed gives the same run, byte for byte");
    ok(sim.res[0].ooms > 0, "at 90%% occupancy the default settings OOM (%llu)", (unsigned long long)sim.res[0].ooms);
    diag("churn OOMs: default %llu, expandable_segments %llu; end reserved-allocated %llu vs %llu",
         (unsigned long long)sim.res[0].ooms, (unsigned long long)sim.res[1].ooms,
         (unsigned long long)(sim.res[0].points[5].reserved - sim.res[0].points[5].allocated),
         (unsigned long long)(sim.res[1].points[5].reserved - sim.res[1].points[5].allocated));
    if (ok(run(DATA "churn_snapshot.yaml", "sim", &sim), "churn from a snapshot's histogram runs"))
        ok(all_ok(&sim) && sim.res[0].ops == 500, "500 ops, checks hold");
}

int main(void)
{
    const char *devs[] = {"sim", "host"};
    for (int i = 0; i < 2; i++) {
        test_fill(devs[i]);
        test_oom_storm(devs[i]);
        test_streams(devs[i]);
        test_soak(devs[i]);
    }
    test_churn();
    return done_testing();
}
