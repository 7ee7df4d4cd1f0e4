/* snapshot_fuzz.c: the snapshot-file loader (pickle, then the walk into struct snapshot) on arbitrary
 * bytes: a clear error or a snapshot whose counts respect the one-record-per-input-byte budget, whose
 * devices partition its segments and events in order, and whose sites
 * read FILE:LINE NAME, aten::OP or autograd NODE. */
#include <string.h>

#include "fuzz.h"
#include "replay/snapshot_file.h"

/* Each device in ascending order, with something, its segments sorted by address and on it; together the
 * devices hold every segment and event once, in storage order. */
static void check_devices(const struct snapshot *s)
{
    size_t segments = 0, events = 0;
    for (size_t i = 0; i < s->ndevices; i++) {
        const struct snapshot_device *d = &s->devices[i];
        fuzz_require(i == 0 || s->devices[i - 1].device < d->device, "devices ascend");
        fuzz_require(d->nsegments || d->nevents, "device %d has segments or events", d->device);
        fuzz_require(!d->nsegments || d->segments == s->segments + segments, "device %d's segments follow", d->device);
        fuzz_require(!d->nevents || (d->events == s->events + events && d->event_sites == s->event_sites + events),
                     "device %d's events follow", d->device);
        for (size_t k = 0; k < d->nsegments; k++) {
            fuzz_require(d->segments[k].device == d->device, "a segment on its device");
            fuzz_require(k == 0 || d->segments[k - 1].address <= d->segments[k].address, "segments sorted by address");
        }
        segments += d->nsegments;
        events += d->nevents;
    }
    fuzz_require(segments == s->nsegments && events == s->nevents, "devices hold every segment and event");
    for (size_t i = 0; i < s->nevents; i++) {
        const char *site = s->event_sites[i];
        fuzz_require(!site || strchr(site, ':') || (!strncmp(site, "autograd ", 9) && site[9]),
                     "a site reads FILE:LINE NAME, aten::OP or autograd NODE");
    }
}

FUZZ_TARGET(snapshot)
{
    struct snapshot s;
    struct err e = {0};
    if (snapshot_parse("fuzz.pickle", data, size, &s, &e)) {
        fuzz_require(e.code != ERR_NONE && e.msg[0] && !s.segments && !s.events && !s.devices,
                     "a failure sets a message, no data");
        return 0;
    }
    size_t records = s.nsegments + s.nevents;
    for (size_t i = 0; i < s.nsegments; i++)
        records += s.segments[i].nblocks;
    fuzz_require(records <= size, "at most one record per input byte (%zu records, %zu bytes)", records, size);
    check_devices(&s);
    snapshot_free(&s);
    return 0;
}
