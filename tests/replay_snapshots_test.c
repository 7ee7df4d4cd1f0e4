/* replay_snapshots_test.c: the real snapshots in shared/data/pytorch-snapshots replayed through the
 * allocator model. The two traces recorded from an empty allocator must reproduce every segment_alloc
 * (size and place), the final layout of every segment, and with recorded segment addresses the address of
 * every alloc; the mid-run ones must replay from their rebuilt start state to their recorded final state. */
#include "tap.h"

#include "replay/replay.h"
#include "util/size.h"

static struct job_result res; /* large: not on the stack */

static int replay(const char *file, bool same)
{
    char path[1024];
    struct err e = {0};
    tap_shared_path(file, path, sizeof path);
    struct replay_options opt = {.device = "sim", .capacity = {80 * GiB, 0.0}, .same_addresses = same};
    int rc = replay_path(path, &opt, &res, NULL, &e);
    if (rc)
        diag("%s", e.msg);
    return rc;
}

/* Without the recorded addresses the sim's own address order decides ties between equal free blocks, so
 * only the segment sizes must agree; with them, everything must. differing: final segments whose layout
 * differs under sim addresses (the data README: 16 of 61 for DeComFL). */
static void exact(const char *file, size_t segs, size_t allocs, size_t final_segs, size_t differing)
{
    for (int same = 0; same <= 1; same++) {
        if (!ok(replay(file, same) == 0, "%s replays (same_addresses=%d)", file, same))
            continue;
        const struct recorded_check *c = &res.check;
        ok(res.checked, "%s is checked against its recording", file);
        ok(!res.rebuilt_start, "%s starts from an empty allocator", file);
        is_int(c->segment_allocs_recorded, segs, "%s: %zu segment_allocs recorded", file, segs);
        is_int(c->segment_allocs_matched, segs, "%s: every segment_alloc size in its place", file);
        is_int(c->allocs, allocs, "%s: %zu allocs", file, allocs);
        is_int(c->final_segments, final_segs, "%s: %zu segments at the end", file, final_segs);
        if (same) {
            ok(c->final_layout_matched, "%s: final layout of every segment matches %s", file, c->first_mismatch);
            is_int(c->addresses_matched, allocs, "%s: every alloc at its recorded address", file);
        } else {
            is_int(c->final_segments - c->final_segments_matched, differing,
                   "%s: with sim addresses, %zu final layouts differ", file, differing);
        }
        is_int(res.run.nooms, 0, "%s: no OOM on 80 GiB", file);
    }
}

int main(void)
{
    char probe[1024];
    FILE *f = fopen(tap_shared_path("data/pytorch-snapshots/MANIFEST.tsv", probe, sizeof probe), "r");
    if (!f)
        tap_skip_all("shared/data/pytorch-snapshots not found (set OOMLAB_SHARED)");
    fclose(f);
    exact("data/pytorch-snapshots/ZidongLiu_DeComFL__memory.pickle", 61, 7946, 61, 16);
    exact("data/pytorch-snapshots/silmont2000_assignment2-systems__mem_snapshot.pickle", 9, 36, 9, 0);

    static const char *const midrun[] = {
        "data/pytorch-snapshots/HugePandaCoder_octree-nca-groupeq__my_snapshot_1e496ac.pickle",
        "data/pytorch-snapshots/JasperSolt_EoR_NN__snapshot.pickle",
        "data/pytorch-snapshots/Maphsge4_select_n__snapshot_5a60101.pickle",
        "data/pytorch-snapshots/Maphsge4_select_n__snapshot_ec5be11.pickle",
        "data/pytorch-snapshots/Muduard_LayoutEditing__dump_snapshot_7bced59.pickle",
        "data/pytorch-snapshots/Muduard_LayoutEditing__memory_snapshot.pkl",
        "data/pytorch-snapshots/Yiyi-philosophy_LLM-inference__oom_snapshot.pickle",
        "data/pytorch-snapshots/cranberrii_ftcourse__memory_snapshot.pickle",
        "data/pytorch-snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle",
    };
    for (size_t i = 0; i < sizeof midrun / sizeof midrun[0]; i++) {
        if (!ok(replay(midrun[i], true) == 0, "%s loads and replays", midrun[i]))
            continue;
        ok(res.check.final_layout_matched, "%s: replay reaches the recorded final state %s", midrun[i],
           res.check.first_mismatch);
        is_int(res.check.segment_allocs_matched, res.check.segment_allocs_recorded,
               "%s: every traced segment_alloc reproduced", midrun[i]);
        is_int(res.check.addresses_matched, res.check.allocs, "%s: every traced alloc at its recorded address",
               midrun[i]);
    }
    return done_testing();
}
