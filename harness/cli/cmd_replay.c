/* cmd_replay.c: `oomlab replay FILE`: replays a PyTorch memory snapshot (each device, or the one
 * --cuda-device names) or a text trace through the one runner under any allocator settings and device
 * capacity, and reports it with the writers run uses, one job per device in the file's group:
 * memory_stats, the OOMs (in PyTorch's words) and, for snapshots, how exactly the replay reproduced what
 * was recorded. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "replay/replay.h"
#include "util/dir.h"
#include "util/size.h"

void cmd_replay_usage(FILE *f)
{
    fprintf(f,
            "usage: oomlab replay [options] FILE\n"
            "  FILE ('-' for standard input; plain or gzip) is a PyTorch snapshot pickle\n"
            "  (torch.cuda.memory._dump_snapshot) or a text trace in `oomlab program`'s form:\n"
            "      alloc ID BYTES [STREAM] [CATEGORY [TAG]] | free ID | oom BYTES | phase NAME | step N\n"
            "      | kernel ... | empty_cache | reset_peak_memory_stats | reset_accumulated_memory_stats\n"
            "options:\n"
            "  Without options a replay reproduces the recording: the settings the snapshot recorded, a\n"
            "  simulated device with room for all it held, and new segments where the driver put them.\n"
            "  Options make a what-if:\n"
            "  --alloc-conf STR     PYTORCH_CUDA_ALLOC_CONF to replay under (default: the snapshot's\n"
            "                       recorded settings; where it records none, $PYTORCH_ALLOC_CONF,\n"
            "                       $PYTORCH_CUDA_ALLOC_CONF, then PyTorch's defaults)\n"
            "  --device DEV         sim:PROFILE (`oomlab list profiles`), sim:SIZE, host, ...\n"
            "  --capacity CAP       device capacity: a size (100MiB, 31.5GiB) or a share of the device\n"
            "                       (0.5, 50%%)\n"
            "  --same-addresses     new segments always take the addresses recorded in segment_alloc events\n"
            "  --sim-addresses      new segments always follow the sim's deterministic address policy\n"
            "  --stop-at-oom        end at the first OOM, as a script that does not catch it would\n"
            "                       (default: report it and go on, as one that catches it)\n"
            "  --cuda-device N      replay only device N of a snapshot (default: each device with something\n"
            "                       to replay, reported as \"device N\" when there are several)\n"
            "  --snapshot FILE      write the replayed run as a PyTorch memory snapshot\n"
            "                       (pytorch.org/memory_viz opens it); FILE.json: the final segments as\n"
            "                       memory_snapshot()'s JSON\n"
            "  --plot DIR           draw the replayed run into DIR (SVG and PNG): NAME-timeline (memory\n"
            "                       over the run) and NAME-segments (the segments at the reserved peak),\n"
            "                       NAME the file's name\n"
            "  --perfetto FILE      write the replayed run as a trace ui.perfetto.dev and chrome://tracing\n"
            "                       open\n"
            CLI_REPORT_HELP CLI_GPU_HELP
            "exit: 0 the trace ran without an OOM, 1 it OOMed, 2 bad input, 3 internal error\n");
}

const struct option cmd_replay_options[] = {
    {"alloc-conf", required_argument, 0, 'a'}, {"device", required_argument, 0, 'd'},
    {"capacity", required_argument, 0, 'c'},   {"same-addresses", no_argument, 0, 's'},
    {"snapshot", required_argument, 0, 'S'},   {"help", no_argument, 0, 'h'},
    {"sim-addresses", no_argument, 0, 'P'},     {"stop-at-oom", no_argument, 0, 'O'},
    {"plot", required_argument, 0, 'p'},       {"perfetto", required_argument, 0, 'T'},
    {"cuda-device", required_argument, 0, 'D'}, CLI_REPORT_OPTIONS, CLI_GPU_OPTIONS,
    {0, 0, 0, 0},
};

int cmd_replay(int argc, char **argv)
{
    struct replay_options opt = {0};
    struct cli_report_args ra = {0};
    struct err e = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_replay_options, NULL)) != -1) {
        if (cli_report_option(c, optarg, &ra))
            continue;
        int gpu = cli_gpu_option(c, optarg, &e);
        if (gpu < 0)
            return cli_fail("replay", &e);
        if (gpu)
            continue;
        switch (c) {
        case 'a': opt.alloc_conf = optarg; opt.alloc_conf_from = "--alloc-conf"; break;
        case 'd': opt.device = optarg; break;
        case 'c':
            if (capacity_parse(optarg, &opt.capacity, &e) && err_prefix(&e, "--capacity: "))
                return cli_fail("replay", &e);
            break;
        case 's': opt.addresses = ADDRESSES_RECORDED; break;
        case 'P': opt.addresses = ADDRESSES_POLICY; break;
        case 'O': opt.stop_at_oom = true; break;
        case 'D': {
            uint64_t n;
            if (uint_parse(optarg, 0, INT_MAX, &n, &e) && err_prefix(&e, "--cuda-device: "))
                return cli_fail("replay", &e);
            opt.one_device = true;
            opt.cuda_device = (int)n;
            break;
        }
        case 'S': opt.snapshot_path = optarg; break;
        case 'p': opt.plot_dir = optarg; break;
        case 'T': opt.perfetto_path = optarg; break;
        case 'h': cmd_replay_usage(stdout); return 0;
        default: cmd_replay_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "oomlab replay: expected one FILE\n");
        cmd_replay_usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    if (opt.perfetto_path && !strcmp(opt.perfetto_path, "-")) {
        err_set(&e, ERR_INPUT, "--perfetto: give a file name (the trace is not written to standard output)");
        return cli_fail("replay", &e);
    }
    if (opt.plot_dir && dir_make(opt.plot_dir, &e) && err_prefix(&e, "--plot: "))
        return cli_fail("replay", &e);
    /* the environment's settings apply where the file records none (text traces, old snapshots) */
    const char *env = getenv("PYTORCH_ALLOC_CONF") ? "PYTORCH_ALLOC_CONF" : "PYTORCH_CUDA_ALLOC_CONF";
    opt.env_alloc_conf = getenv(env);
    opt.env_name = env;
    struct report_outputs out;
    if (report_outputs_open(&out, "replay", ra.json, ra.csv, ra.tap, &e))
        return cli_fail("replay", &e);
    if (opt.snapshot_path && !strcmp(opt.snapshot_path, "-"))
        out.table = false;
    struct job_result *res;
    size_t njobs;
    int rc = replay_path(path, &opt, &res, &njobs, &e);
    if (rc == 0) {
        struct report_group g = {.kind = REPORT_REPLAY, .name = path, .jobs = res, .njobs = njobs};
        report_outputs_add(&out, &g);
    }
    rc = report_outputs_close(&out, rc == 0, &e) || rc;
    free(res);
    return rc ? cli_fail("replay", &e) : cli_exit_status(&out);
}
