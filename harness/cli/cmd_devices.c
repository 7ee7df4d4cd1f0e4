/* cmd_devices.c: `oomlab devices`: every kind of device in the device-kind table with its availability,
 * default capacity, what it is (when unavailable, the reason: the CUDA runtime's own message for cuda),
 * and what it can do, read from its flags. */
#include <getopt.h>
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

void cmd_devices_usage(FILE *f)
{
    fprintf(f, "usage: oomlab devices\n"
               "  lists every kind of device with its availability, default capacity and what it can do; when a\n"
               "  device is unavailable, why (for cuda, the CUDA runtime's own message)\n");
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
    return 0;
}
