/* stress_profile_fuzz.c: the stress-profile loader (the scenario loader's YAML and key tables, each kind's
 * section, sizes, a soak's scenario and a snapshot's histogram) on arbitrary bytes, given to it as an
 * anonymous memory file (memfd) named by /proc/self/fd/N. A clear error or a profile; never a crash. */
#define _GNU_SOURCE /* memfd_create */
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "stress/profile.h"

FUZZ_TARGET(stress_profile)
{
    int fd = memfd_create("profile.yaml", MFD_CLOEXEC);
    fuzz_require(fd >= 0, "memfd_create works");
    fuzz_require(size == 0 || write(fd, data, size) == (ssize_t)size, "the memfd takes the input");
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    static struct stress_profile p;
    struct err e = {0};
    if (stress_profile_load(path, &p, &e))
        fuzz_require(e.code != ERR_NONE && e.msg[0], "a failed load says why");
    else
        fuzz_require(p.nsettings >= 1 && p.kind >= 0 && p.kind < STRESS_KIND_COUNT, "a loaded profile is whole");
    stress_profile_free(&p);
    close(fd);
    return 0;
}
