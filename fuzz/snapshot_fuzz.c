/* snapshot_fuzz.c: the snapshot-file loader (pickle, then the walk into struct snapshot) on arbitrary
 * bytes: a clear error or a snapshot whose counts respect the one-record-per-input-byte budget, whose
 * devices partition its segments and events in order, and whose sites
 * read FILE:LINE NAME, aten::OP or autograd NODE; and the streamed reading the same as the whole-tree one
 * (snapshot_parse_whole): the same message, or the same snapshot field by field. */
#include <string.h>

#include "fuzz.h"
#include "replay/snapshot_file.h"
#include "snapshot_same.h"

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
    struct snapshot s, w, streamed;
    struct err e = {0}, we = {0};
    int rc = snapshot_parse("fuzz.pickle", data, size, &s, &e);
    int wrc = snapshot_parse_whole("fuzz.pickle", data, size, &w, &we);
    fuzz_require(rc == wrc && e.code == we.code && !strcmp(e.msg, we.msg),
                 "snapshot_parse and the whole reading fail alike ('%s' / '%s')", e.msg, we.msg);
    if (snapshot_parse_streamed("fuzz.pickle", data, size, &streamed) == 0) {
        fuzz_require(wrc == 0, "what the streamed reading takes, the whole one takes (it says: %s)", we.msg);
        size_t at = 0;
        const char *differs = wrc == 0 ? snapshot_difference(&streamed, &w, &at) : NULL;
        fuzz_require(!differs, "the streamed and whole readings agree (not on %s %zu)", differs, at);
        snapshot_free(&streamed);
    } else {
        fuzz_require(!streamed.segments && !streamed.events && !streamed.devices && !streamed.sites,
                     "a dropped streamed reading leaves nothing");
    }
    if (wrc == 0)
        snapshot_free(&w);
    if (rc) {
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
