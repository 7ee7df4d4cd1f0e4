/* cmd_replay.c: `oomlab replay FILE`: replays a PyTorch memory snapshot or a text trace through the
 * allocator model under any allocator settings and device capacity, and reports memory_stats, the OOMs
 * (in PyTorch's words) and, for snapshots, how exactly the replay reproduced what was recorded. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "device/device_open.h"
#include "replay/replay.h"
#include "report/json_out.h"
#include "util/size.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: oomlab replay [options] FILE\n"
            "  FILE is a PyTorch snapshot pickle (torch.cuda.memory._dump_snapshot) or a text trace:\n"
            "      alloc ID BYTES [STREAM] | free ID | empty_cache | reset_peak_memory_stats | # comment\n"
            "options:\n"
            "  --alloc-conf STR     PYTORCH_CUDA_ALLOC_CONF to replay under (default: $PYTORCH_ALLOC_CONF, then\n"
            "                       $PYTORCH_CUDA_ALLOC_CONF, then PyTorch's defaults)\n"
            "  --device sim:PROFILE simulated GPU (default sim:rtx5090; `oomlab list profiles`)\n"
            "  --capacity CAP       device capacity instead of the profile's: a size (100MiB, 31.5GiB)\n"
            "                       or a share of it (0.5, 50%%)\n"
            "  --same-addresses     new segments take the addresses recorded in the snapshot's segment_alloc events\n"
            "  --json FILE          write stats, OOMs and the check as JSON\n"
            "  --snapshot FILE      write the model's final segments and blocks as JSON, in memory_snapshot()'s structure\n"
            "All figures are modelled by the allocator model on a simulated device.\n");
}

static int is_pickle(const char *path, struct err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ERR_INPUT, "%s: cannot open: %m", path);
    int c = fgetc(f);
    fclose(f);
    return c == 0x80; /* pickle PROTO opcode */
}

static void print_summary(const char *path, const struct replay_input *in, const struct device *dev,
                          const struct alloc_config *cfg, const struct replay_options *opt,
                          const struct replay_result *res)
{
    const struct alloc_stats *s = &res->stats;
    char b1[32], b2[32], b3[32], b4[32];
    size_t allocs = 0, frees = 0;
    for (size_t i = 0; i < in->nevents; i++) {
        allocs += in->events[i].op == RP_ALLOC;
        frees += in->events[i].op == RP_FREE;
    }
    printf("oomlab replay %s\n", path);
    printf("  input      %s: %zu allocs, %zu frees%s\n", in->is_snapshot ? "PyTorch snapshot" : "text trace", allocs,
           frees, in->ninitial ? " (recording began mid-run: state at trace start rebuilt)" : "");
    printf("  device     %s (modelled)\n", dev->name);
    printf("  settings   %s\n", cfg->text[0] ? cfg->text : "(PyTorch defaults)");
    size_format_pytorch((uint64_t)s->allocated_bytes[STAT_ALL].peak, b1, sizeof b1);
    size_format_pytorch((uint64_t)s->reserved_bytes[STAT_ALL].peak, b2, sizeof b2);
    size_format_pytorch((uint64_t)s->reserved_bytes[STAT_ALL].current, b3, sizeof b3);
    size_format_pytorch((uint64_t)s->allocated_bytes[STAT_ALL].current, b4, sizeof b4);
    printf("modelled memory (PyTorch memory_stats):\n");
    printf("  peak allocated   %12s   allocated_bytes.all.peak\n", b1);
    printf("  peak reserved    %12s   reserved_bytes.all.peak\n", b2);
    printf("  end allocated    %12s   reserved at end %s\n", b4, b3);
    printf("  cudaMalloc calls %12lld   cudaFree calls %lld, alloc retries %lld, OOMs %lld\n",
           (long long)s->num_device_alloc, (long long)s->num_device_free, (long long)s->num_alloc_retries,
           (long long)s->num_ooms);
    for (size_t i = 0; i < res->nooms; i++)
        printf("  OOM at %s %zu: %s\n", in->is_snapshot ? "event" : "line", res->ooms[i].event, res->ooms[i].message);
    for (size_t i = 0; i < res->nwarnings; i++)
        printf("  warning: %s\n", res->warnings[i]);
    if (res->frees_of_unknown > res->nwarnings)
        printf("  (%zu frees of allocations that do not exist were ignored in all)\n", res->frees_of_unknown);
    if (!in->is_snapshot)
        return;
    const struct replay_check *c = &res->check;
    printf("check against the snapshot:\n");
    printf("  segment_allocs   %zu/%zu matched (size and place in the event order)\n", c->segment_allocs_matched,
           c->segment_allocs_recorded);
    if (c->final_layout_matched)
        printf("  final layout     every segment's blocks match\n");
    else
        printf("  final layout     %zu/%zu segments laid out alike\n", c->final_segments_matched, c->final_segments);
    printf("  alloc addresses  %zu/%zu matched (%s)\n", c->addresses_matched, c->allocs,
           opt->same_addresses ? "recorded segment addresses" : "segment-relative");
    if (c->first_mismatch[0])
        printf("  first mismatch   %s\n", c->first_mismatch);
    if (c->first_mismatch[0] && !opt->same_addresses)
        printf("  note: best fit breaks ties between equal free blocks by address, so simulated addresses can\n"
               "        change which block is reused; --same-addresses places segments where the driver did\n");
}

int cmd_replay(int argc, char **argv)
{
    static const struct option opts[] = {
        {"alloc-conf", required_argument, 0, 'a'}, {"device", required_argument, 0, 'd'},
        {"capacity", required_argument, 0, 'c'},   {"json", required_argument, 0, 'j'},
        {"same-addresses", no_argument, 0, 's'},   {"help", no_argument, 0, 'h'},
        {"snapshot", required_argument, 0, 'S'},
        {0, 0, 0, 0},
    };
    const char *conf = getenv("PYTORCH_ALLOC_CONF");
    if (!conf)
        conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
    const char *device = "sim:rtx5090", *capacity_s = NULL, *json_path = NULL, *snapshot_path = NULL;
    struct replay_options opt = {0};
    struct err e = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'a': conf = optarg; break;
        case 'd': device = optarg; break;
        case 'c': capacity_s = optarg; break;
        case 'j': json_path = optarg; break;
        case 's': opt.same_addresses = true; break;
        case 'S': snapshot_path = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "oomlab replay: expected one FILE\n");
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    struct capacity capacity = {0, 0.0};
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    if ((capacity_s && capacity_parse(capacity_s, &capacity, &e) && err_prefix(&e, "--capacity: ")) ||
        alloc_config_parse(&cfg, conf, &e)) {
        fprintf(stderr, "oomlab replay: %s\n", e.msg);
        return 2;
    }
    struct replay_input in;
    int pickle = is_pickle(path, &e);
    if (pickle < 0 || (pickle ? snapshot_replay_load(path, &in, &e) : text_trace_load(path, &in, &e))) {
        fprintf(stderr, "oomlab replay: %s\n", e.msg);
        return e.code == ERR_INTERNAL ? 3 : 2;
    }
    struct device *dev = device_open(device, capacity, NULL, &e);
    struct replay_result res;
    int rc = 0;
    if (!dev || replay_run(&in, dev, &cfg, &opt, &res, &e)) {
        fprintf(stderr, "oomlab replay: %s\n", e.msg);
        rc = e.code == ERR_INPUT ? 2 : 3;
    } else {
        if ((json_path && json_write_replay(json_path, &in, dev, &res, &e)) ||
            (snapshot_path && json_write_file(snapshot_path, json_alloc_snapshot(&res.final), &e))) {
            fprintf(stderr, "oomlab replay: %s\n", e.msg);
            rc = e.code == ERR_INPUT ? 2 : 3;
        }
        if ((!json_path || strcmp(json_path, "-")) && (!snapshot_path || strcmp(snapshot_path, "-")))
            print_summary(path, &in, dev, &cfg, &opt, &res);
        replay_result_free(&res);
    }
    if (dev)
        dev->ops->destroy(dev);
    replay_input_free(&in);
    return rc;
}
