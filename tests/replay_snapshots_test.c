/* replay_snapshots_test.c: every real snapshot in shared/data/pytorch-snapshots replayed as a user types
 * it, with no options: under the settings it recorded, on a device with room for what it held, with new
 * segments where the driver put them. Each must reproduce every segment_alloc (size and place), every
 * alloc's address and the final block layout of every segment, without an OOM, and peak at the reserved
 * bytes the recording held (computed apart, in Python: the final segments minus the traced segment
 * events, then the running sum). What-ifs: the sim's own addresses change which equal free block is
 * reused (16 of DeComFL's 61 final layouts), and a device too small for the state at trace start is
 * refused with the size it needs. A snapshot's devices replay apart, one job each (two-devices.pickle), or
 * the one --cuda-device names; a device with nothing to replay is said. */
#include "tap.h"

#include "replay/replay.h"
#include "util/size.h"

static struct job_result res; /* large: not on the stack */

struct expected {
    const char *file;
    size_t segment_allocs, allocs, final_segments;
    uint64_t peak_reserved;
};

static const struct expected files[] = {
    {"HugePandaCoder_octree-nca-groupeq__my_snapshot_1e496ac.pickle", 48, 1491, 51, 20860370944},
    {"JasperSolt_EoR_NN__snapshot.pickle", 7, 1935, 10, 134217728},
    {"LfieLike_SketchKV2__my_snapshot.pickle", 0, 0, 259, 17133731840},
    {"MAGMA27_assignment2-systems__memory_snapshot.pickle", 0, 1721, 216, 14180941824},
    {"Maphsge4_select_n__snapshot_5a60101.pickle", 13, 1497, 82, 2776629248},
    {"Maphsge4_select_n__snapshot_bdf4fe2.pickle", 0, 0, 40, 5559549952},
    {"Maphsge4_select_n__snapshot_ec5be11.pickle", 584, 3058, 136, 22519218176},
    {"Muduard_LayoutEditing__dump_snapshot_7bced59.pickle", 0, 0, 673, 11274289152},
    {"Muduard_LayoutEditing__memory_snapshot.pkl", 0, 0, 255, 3649044480},
    {"Wedsonlin_assignment2-systems__results_medium_1024_inference_memory_snapshot.pickle", 0, 1280, 108, 3204448256},
    {"Wedsonlin_assignment2-systems__results_medium_128_inference_memory_snapshot.pickle", 0, 1280, 98, 1763704832},
    {"Wedsonlin_assignment2-systems__results_medium_128_training_memory_snapshot.pickle", 0, 6526, 377, 7235174400},
    {"Wedsonlin_assignment2-systems__results_medium_256_inference_memory_snapshot.pickle", 0, 1280, 101, 1864368128},
    {"Wedsonlin_assignment2-systems__results_medium_256_training_memory_snapshot.pickle", 0, 6624, 495, 9265217536},
    {"Wedsonlin_assignment2-systems__results_medium_512_inference_memory_snapshot.pickle", 0, 1666, 101, 1981808640},
    {"Yiyi-philosophy_LLM-inference__log1_1.3b_snapshot.pickle", 0, 0, 112, 1851785216},
    {"Yiyi-philosophy_LLM-inference__oom_snapshot.pickle", 0, 0, 176, 11844714496},
    {"ZidongLiu_DeComFL__memory.pickle", 61, 7946, 61, 1897922560},
    {"ZijianDu_Attention__memory_c005a26.pickle", 0, 0, 499, 16236150784},
    {"bcrafton_assignment2-systems__memory_snapshot.pickle", 0, 2162, 96, 4238344192},
    {"cranberrii_ftcourse__memory_snapshot.pickle", 152, 3505, 215, 6471811072},
    {"jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle", 0, 0, 7, 33554432},
    {"kkaitlyn111_cs336-a2__memory_files_memory_ctx128_forward_mixed.pickle", 461, 2703, 688, 24245174272},
    {"kkaitlyn111_cs336-a2__memory_files_memory_ctx256_forward_.pickle", 471, 2057, 700, 26545750016},
    {"kkaitlyn111_cs336-a2__memory_files_memory_ctx256_forward_mixed.pickle", 598, 2702, 827, 28848422912},
    {"kkaitlyn111_cs336-a2__memory_files_memory_ctx256_fullstep_.pickle", 791, 6769, 1021, 61111009280},
    {"kkaitlyn111_cs336-a2__memory_files_memory_ctx512_forward_.pickle", 428, 2057, 658, 44715474944},
    {"notHanmin_assignment2-systems__memory_snapshot_forward_without_mixed.pickle", 0, 3368, 1423, 45730496512},
    {"silmont2000_assignment2-systems__mem_snapshot.pickle", 9, 36, 9, 3781165056},
    {"silmont2000_assignment2-systems__memory_forward_bf16_128.pickle", 0, 937, 43, 861929472},
    {"silmont2000_assignment2-systems__memory_forward_fp32_128.pickle", 0, 681, 29, 610271232},
};

/* Replays path into res: one job (the file has one device to replay); 0, or -1 with e. */
static int replay_one(const char *path, const struct replay_options *opt, struct err *e)
{
    struct job_result *jobs;
    size_t n;
    if (replay_path(path, opt, &jobs, &n, e))
        return -1;
    res = jobs[0];
    free(jobs);
    return n == 1 ? 0 : err_set(e, ERR_INTERNAL, "%s: %zu jobs, one expected", path, n);
}

static int replay(const char *file, const struct replay_options *opt, struct err *e)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "data/pytorch-snapshots/%s", file);
    tap_shared_path(rel, path, sizeof path);
    return replay_one(path, opt, e);
}

static void exact(const struct expected *x)
{
    struct replay_options plain = {0};
    struct err e = {0};
    if (!ok(replay(x->file, &plain, &e) == 0, "%s replays", x->file)) {
        diag("%s", e.msg);
        return;
    }
    const struct recorded_check *c = &res.replay.check;
    ok(res.replay.checked, "%s: checked against its recording", x->file);
    is_int(c->segment_allocs_recorded, x->segment_allocs, "%s: %zu segment_allocs recorded", x->file,
           x->segment_allocs);
    is_int(c->segment_allocs_matched, x->segment_allocs, "%s: every segment_alloc in its size and place", x->file);
    is_int(c->allocs, x->allocs, "%s: %zu allocs", x->file, x->allocs);
    is_int(c->addresses_matched, x->allocs, "%s: every alloc at its recorded address", x->file);
    is_int(c->final_segments, x->final_segments, "%s: %zu segments at the end", x->file, x->final_segments);
    ok(c->final_layout_matched, "%s: the final layout of every segment %s", x->file, c->first_mismatch);
    is_int(res.run.nooms, 0, "%s: no OOM", x->file);
    is_u64(res.run.peak_reserved, x->peak_reserved, "%s: peak reserved as recorded", x->file);
    is_u64(res.replay.needed, x->peak_reserved, "%s: the capacity it needs is its peak reserved", x->file);
}

/* The synthetic files of tests/data/snapshots (scripts/make-snapshot-fixtures), for what no real one has. */
static void fixture(const char *file, size_t allocs, size_t maps, size_t inferred, size_t private_pools)
{
    char path[256];
    snprintf(path, sizeof path, "tests/data/snapshots/%s", file);
    struct replay_options plain = {0};
    struct err e = {0};
    if (!ok(replay_one(path, &plain, &e) == 0, "%s replays", file)) {
        diag("%s", e.msg);
        return;
    }
    const struct recorded_check *c = &res.replay.check;
    ok(c->final_layout_matched && c->addresses_matched == c->allocs && c->allocs == allocs &&
           c->segment_maps_matched == c->segment_maps_recorded && c->segment_maps_recorded == maps && !res.run.nooms,
       "%s: exact (%zu allocs, %zu segment_maps) %s", file, allocs, maps, c->first_mismatch);
    is_int(res.replay.inferred_sizes, inferred, "%s: %zu block sizes inferred", file, inferred);
    is_int(res.replay.private_pool_segments, private_pools, "%s: %zu segments in private pools, said", file,
           private_pools);
}

/* tests/data/snapshots/two-devices.pickle: a 4 MiB allocation on device 0 and an 8 MiB one on device 1,
 * each in a 20 MiB segment. */
static void devices(void)
{
    const char *path = "tests/data/snapshots/two-devices.pickle";
    struct job_result *jobs = NULL;
    size_t n = 0;
    struct err e = {0};
    if (ok(replay_path(path, &(struct replay_options){0}, &jobs, &n, &e) == 0 && n == 2,
           "two devices replay as two jobs%s%s", e.msg[0] ? ": " : "", e.msg)) {
        for (int d = 0; d < 2; d++) {
            const struct job_result *j = &jobs[d];
            char name[24];
            snprintf(name, sizeof name, "device %d", d);
            is_str(j->name, name, "job %d is named %s", d, name);
            is_str(j->group, path, "in the file's group");
            ok(j->replay.checked && j->replay.check.final_layout_matched && j->replay.check.addresses_matched == 1 &&
                   j->replay.check.segment_allocs_matched == 1 && !j->run.nooms,
               "%s replays exactly %s", name, j->replay.check.first_mismatch);
            is_u64(j->run.peak_allocated, (uint64_t)(d + 1) * 4 * MiB, "%s: its own allocation only", name);
            is_u64(j->run.peak_reserved, 20 * MiB, "%s: its own segment only", name);
        }
    }
    free(jobs);
    e = (struct err){0};
    struct replay_options one = {.one_device = true, .cuda_device = 1};
    if (ok(replay_path(path, &one, &jobs, &n, &e) == 0 && n == 1, "--cuda-device 1 replays one job")) {
        is_str(jobs[0].name, "device 1", "named for its device");
        is_u64(jobs[0].run.peak_allocated, 8 * MiB, "the second device's 8 MiB");
    }
    free(jobs);
    e = (struct err){0};
    one.cuda_device = 2;
    ok(replay_path(path, &one, &jobs, &n, &e) == -1 && e.code == ERR_INPUT && !jobs && n == 0 &&
           strstr(e.msg, "--cuda-device 2: the file has nothing to replay on device 2 (it has something on devices "
                         "0 and 1)"),
       "a device the file has nothing on is said: %s", e.msg);
    e = (struct err){0};
    ok(replay_path(path, &(struct replay_options){.snapshot_path = "/tmp/never-written.pickle"}, &jobs, &n, &e) == -1 &&
           strstr(e.msg, "--snapshot writes one device's replay, and the file has 2 devices to replay"),
       "--snapshot of two devices is refused: %s", e.msg);
    e = (struct err){0};
    ok(replay_path("tests/data/snapshots/sites.pickle", &(struct replay_options){.one_device = true}, &jobs, &n,
                   &e) == 0 && n == 1 && !strcmp(jobs[0].name, "replay"),
       "a one-device file keeps the name replay under --cuda-device 0");
    free(jobs);
}

int main(void)
{
    devices();
    /* a block live at trace start that PyTorch did not split: its end is where a traced allocation above it
     * was placed while it lived (issue 11 item 3) */
    fixture("midrun-unsplit-remainder.pickle", 2, 0, 1, 0);
    /* expandable segments: maps and unmaps replayed, a mid-run mapped range rebuilt (issue 10 row 1) */
    fixture("expandable-map-unmap.pickle", 2, 2, 0, 0);
    fixture("expandable-midrun.pickle", 1, 1, 1, 0);
    /* CUDA graph private pools: not modelled, and said */
    fixture("graph-pool.pickle", 0, 0, 0, 1);

    char probe[1024];
    FILE *f = fopen(tap_shared_path("data/pytorch-snapshots/MANIFEST.tsv", probe, sizeof probe), "r");
    if (!f) {
        diag("shared/data/pytorch-snapshots not found (set OOMLAB_SHARED): the real snapshots are skipped");
        return done_testing();
    }
    fclose(f);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        exact(&files[i]);

    /* Muduard's device 0 records only a snapshot marker: its device 1 is replayed, device 0 is said */
    struct err e = {0};
    if (ok(replay("Muduard_LayoutEditing__dump_snapshot_7bced59.pickle", &(struct replay_options){0}, &e) == 0,
           "Muduard dump_snapshot replays as one job")) {
        is_str(res.name, "replay", "named replay: one device has something to replay");
        ok(res.run.nwarnings >= 1 && strstr(res.run.warnings[0], "device 0: nothing to replay (no segments, and the "
                                                                 "trace holds no allocator event"),
           "device 0 is said: %s", res.run.nwarnings ? res.run.warnings[0] : "(no warning)");
    }

    /* what-if: the sim's own addresses change which of two equal free blocks is reused */
    struct replay_options sim_addresses = {.addresses = ADDRESSES_POLICY};
    e = (struct err){0};
    if (ok(replay("ZidongLiu_DeComFL__memory.pickle", &sim_addresses, &e) == 0, "DeComFL with the sim's addresses")) {
        is_int(res.replay.check.segment_allocs_matched, 61, "DeComFL: segment sizes do not depend on addresses");
        is_int(res.replay.check.final_segments - res.replay.check.final_segments_matched, 16,
               "DeComFL: with the sim's addresses, 16 of 61 final layouts differ");
    }
    /* what-if: a card too small for the state at trace start is refused, naming what it needs */
    struct replay_options t4 = {.device = "sim:t4"};
    ok(replay("kkaitlyn111_cs336-a2__memory_files_memory_ctx256_fullstep_.pickle", &t4, &e) == -1 &&
           e.code == ERR_INPUT && strstr(e.msg, "more than sim:t4 has (14.75 GiB)") &&
           strstr(e.msg, "--capacity 56.92GiB"),
       "a state at trace start larger than the device: %s", e.msg);
    /* what-if: a card that holds the start but not the trace OOMs, and says what it needs */
    struct replay_options small = {.device = "sim", .capacity = {1536 * MiB, 0.0}};
    e = (struct err){0};
    if (ok(replay("ZidongLiu_DeComFL__memory.pickle", &small, &e) == 0, "DeComFL on 1.5 GiB replays")) {
        ok(res.run.nooms > 0, "DeComFL on 1.5 GiB OOMs (%llu times)", (unsigned long long)res.run.nooms);
        is_u64(res.replay.needed, 1897922560, "and needs the 1,810 MiB the recording reserved");
    }
    return done_testing();
}
