/* scenario_fuzz.c: the YAML scenario loader (libyaml, the key tables, every validation) on arbitrary
 * bytes, given to it as a file: an anonymous memory file (memfd) named by /proc/self/fd/N, so nothing
 * touches the disk. A clear error or a scenario; never a crash. */
#define _GNU_SOURCE /* memfd_create */
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "scenario/scenario.h"

FUZZ_TARGET(scenario)
{
    int fd = memfd_create("scenario.yaml", MFD_CLOEXEC);
    fuzz_require(fd >= 0, "memfd_create works");
    fuzz_require(size == 0 || write(fd, data, size) == (ssize_t)size, "the memfd takes the input");
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    struct scenario sc;
    struct err e = {0};
    if (scenario_load(path, &sc, &e) == 0)
        scenario_free(&sc);
    else
        fuzz_require(e.code != ERR_NONE && e.msg[0], "a failed load says why");
    close(fd);
    return 0;
}
