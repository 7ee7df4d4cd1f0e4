/* cmd_devices.c: `oomlab devices`: every kind of device in the device-kind table with its availability,
 * default capacity, what it is (when unavailable, the reason: the CUDA runtime's own message for cuda),
 * and what it can do, read from its flags. */
#include <stdio.h>

#include "cli/commands.h"
#include "device/device_kind.h"

static void print_capabilities(unsigned flags)
{
    printf("  %-6s %-4s %-12s figures %s; %s; %s\n", "", "", "", flags & DEVICE_MEASURED ? "measured" : "modelled",
           !(flags & DEVICE_RUNS_KERNELS)        ? "kernels timed, not run"
           : flags & DEVICE_ASYNC_KERNELS        ? "kernels run asynchronously, timed when they end"
                                                 : "kernels run and timed one by one",
           flags & DEVICE_DETERMINISTIC_PLACEMENT ? "segments placed by the deterministic sim policy"
                                                  : "segment addresses from the driver");
}

int cmd_devices(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(argc > 1 && argv[1][0] == '-' && argv[1][1] == 'h' ? stdout : stderr,
                "usage: oomlab devices\n  lists every device with its availability, capacity and reason\n");
        return argv[1][0] == '-' && argv[1][1] == 'h' ? 0 : 2;
    }
    printf("  %-6s %-4s %-12s %s\n", "device", "ok", "capacity", "notes");
    for (size_t i = 0; i < device_kind_count(); i++) {
        const struct device_kind *k = device_kind_at(i);
        struct device_probe p;
        k->probe(&p);
        printf("  %-6s %-4s %-12s %s\n", k->name, p.available ? "yes" : "no", p.capacity, p.notes);
        print_capabilities(k->flags);
    }
    return 0;
}
