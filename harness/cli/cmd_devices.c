/* cmd_devices.c: `oomlab devices`: every device with its availability, capacity and, when unavailable,
 * the reason (the CUDA runtime's own message for cuda). */
#include <hwloc.h>
#include <stdio.h>

#include "cli/commands.h"
#include "device/cuda_loader.h"
#include "device/host.h"
#include "device/profiles.h"
#include "util/size.h"

static void host_line(void)
{
    hwloc_topology_t topo;
    int cores = 0, pus = 0;
    if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
        cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    }
    hwloc_topology_destroy(topo);
    const char *source;
    uint64_t mem = host_memory_bytes(&source);
    char half[32], all[32];
    size_format_pytorch(mem / 2, half, sizeof half);
    size_format_pytorch(mem, all, sizeof all);
    printf("  %-6s %-4s %-12s real host memory under a capacity (default half of %s %s), CPU kernels on\n"
           "  %-6s %-4s %-12s real data, throughput measured; %d cores, %d hardware threads (hwloc)\n",
           "host", mem ? "yes" : "no", half, all, source, "", "", "", cores, pus);
}

int cmd_devices(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(argc > 1 && argv[1][0] == '-' && argv[1][1] == 'h' ? stdout : stderr,
                "usage: oomlab devices\n  lists every device with its availability, capacity and reason\n");
        return argv[1][0] == '-' && argv[1][1] == 'h' ? 0 : 2;
    }
    printf("  %-6s %-4s %-12s %s\n", "device", "ok", "capacity", "notes");
    const struct gpu_profile *p = gpu_profile_find("rtx5090");
    char total[32];
    size_format_pytorch(p->total_bytes, total, sizeof total);
    printf("  %-6s %-4s %-12s simulated GPU, figures modelled: sim:PROFILE (", "sim", "yes", total);
    for (size_t i = 0; i < gpu_profile_count(); i++)
        printf("%s%s", i ? ", " : "", gpu_profile_at(i)->name);
    printf("; default rtx5090) or sim:SIZE\n");
    host_line();
    char why[512] = "";
    int n = cuda_probe(NULL, why, sizeof why);
    if (n > 0)
        printf("  %-6s %-4s %-12s %d GPU%s through build/oomlab-cuda.so: cuda:0 .. cuda:%d, figures measured\n", "cuda",
               "yes", "see cuda:N", n, n > 1 ? "s" : "", n - 1);
    else
        printf("  %-6s %-4s %-12s unavailable: %s\n", "cuda", "no", "-", why);
    return 0;
}
