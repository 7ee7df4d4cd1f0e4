/* cmd_devices.c: `oomlab devices`: every kind of device in the device-kind table with its availability,
 * default capacity, what it is (when unavailable, the reason: the CUDA runtime's own message for cuda),
 * and what it can do, read from its flags; then the host's topology (hwloc) and every GPU NVML sees,
 * with its memory, the processes holding it, its mode and telemetry, and the profile sim:gpuN takes. */
#include <getopt.h>
#include <stdio.h>

#include "cli/commands.h"
#include "device/device_kind.h"
#include "device/profile_detect.h"
#include "device/topology.h"
#include "util/size.h"

static void print_capabilities(unsigned flags)
{
    printf("  %-6s %-4s %-12s figures %s; %s; %s\n", "", "", "", flags & DEVICE_MEASURED ? "measured" : "modelled",
           !(flags & DEVICE_RUNS_KERNELS)        ? "kernels timed, not run"
           : flags & DEVICE_ASYNC_KERNELS        ? "kernels run asynchronously, timed when they end"
                                                 : "kernels run and timed one by one",
           flags & DEVICE_DETERMINISTIC_PLACEMENT ? "segments placed by the deterministic sim policy"
                                                  : "segment addresses from the driver");
}

static void print_topology(void)
{
    struct host_topology t;
    struct err e = {0};
    char line[512];
    if (host_topology_read(&t, &e))
        snprintf(line, sizeof line, "unavailable: %.400s", e.msg);
    else
        host_topology_format(&t, line, sizeof line);
    printf("\nhost topology (hwloc): %s\n", line);
}

static void print_gpu(const struct nvml_gpu *g)
{
    static const char *const modes[] = {"default", "exclusive thread", "prohibited", "exclusive process"};
    char total[32], free_[32], used[32], others[64] = "n/a", reasons[160], a[32], b[32], c[32], d[32], x[32], y[32];
    size_format_pytorch(g->total, total, sizeof total);
    size_format_pytorch(g->free, free_, sizeof free_);
    size_format_pytorch(g->used, used, sizeof used);
    if (g->others != NVML_UNKNOWN) {
        char o[32];
        size_format_pytorch((uint64_t)g->others_used, o, sizeof o);
        snprintf(others, sizeof others, "%lld (%s)", g->others, o);
    }
    nvml_reasons_format(g->clock_event_reasons, reasons, sizeof reasons);
    const struct gpu_profile *p = gpu_profile_for(g);
    printf("  %u  %s  %s\n", g->index, g->name, g->uuid);
    printf("     memory (measured): %s total, %s free, %s used; other processes: %s; MIG %s; compute mode %s\n",
           total, free_, used, others, g->mig == NVML_UNKNOWN ? "n/a" : g->mig ? "on" : "off",
           g->compute_mode >= 0 && g->compute_mode <= 3 ? modes[g->compute_mode] : "n/a");
    printf("     now (measured): %s, %s, SM %s, memory %s; clock events: %s; ECC errors %s corrected, %s uncorrected\n",
           nvml_reading_format(g->temperature_c, "%lld C", a, sizeof a), nvml_reading_format(g->power_mw, "%lld mW", b, sizeof b),
           nvml_reading_format(g->sm_mhz, "%lld MHz", c, sizeof c), nvml_reading_format(g->mem_mhz, "%lld MHz", d, sizeof d), reasons,
           nvml_reading_format(g->ecc_corrected, "%lld", x, sizeof x), nvml_reading_format(g->ecc_uncorrected, "%lld", y, sizeof y));
    if (p)
        printf("     simulated as sim:gpu%u: profile %s (%s)\n", g->index, p->name, p->description);
    else
        printf("     simulated as: no profile matches; sim:SIZE with its total\n");
}

static void print_gpus(void)
{
    static struct nvml_gpu g[NVML_MAX_GPUS];
    int n;
    struct err e = {0};
    if (nvml_list(g, NVML_MAX_GPUS, &n, &e)) {
        printf("GPUs (NVML): %s\n", e.msg);
        return;
    }
    printf("GPUs (NVML): %d%s\n", n, n ? "; cuda:auto takes the usable one with the most free memory" : "");
    for (int i = 0; i < n; i++)
        print_gpu(&g[i]);
}

void cmd_devices_usage(FILE *f)
{
    fprintf(f, "usage: oomlab devices\n"
               "  lists every kind of device with its availability, default capacity and what it can do; when a\n"
               "  device is unavailable, why (for cuda, the CUDA runtime's own message); then the host's topology\n"
               "  (hwloc) and every GPU NVML sees ($OOMLAB_NVML names another NVML library)\n");
}

const struct option cmd_devices_options[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

int cmd_devices(int argc, char **argv)
{
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_devices_options, NULL)) != -1) {
        cmd_devices_usage(c == 'h' ? stdout : stderr);
        return c == 'h' ? 0 : 2;
    }
    if (optind < argc) {
        fprintf(stderr, "oomlab devices: takes no arguments\n");
        cmd_devices_usage(stderr);
        return 2;
    }
    printf("  %-6s %-4s %-12s %s\n", "device", "ok", "capacity", "notes");
    for (size_t i = 0; i < device_kind_count(); i++) {
        const struct device_kind *k = device_kind_at(i);
        struct device_probe p;
        k->probe(&p);
        printf("  %-6s %-4s %-12s %s\n", k->name, p.available ? "yes" : "no", p.capacity, p.notes);
        print_capabilities(k->flags);
    }
    print_topology();
    print_gpus();
    return 0;
}
