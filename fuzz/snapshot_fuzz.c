/* snapshot_fuzz.c: the snapshot-file loader (pickle, then the walk into struct snapshot) on arbitrary
 * bytes: a clear error or a snapshot whose counts respect the one-record-per-input-byte budget. */
#include "fuzz.h"
#include "replay/snapshot_file.h"

FUZZ_TARGET(snapshot)
{
    struct snapshot s;
    struct err e = {0};
    if (snapshot_parse("fuzz.pickle", data, size, &s, &e)) {
        fuzz_require(e.code != ERR_NONE && e.msg[0] && !s.segments && !s.events, "a failure sets a message, no data");
        return 0;
    }
    size_t records = s.nsegments + s.nevents;
    for (size_t i = 0; i < s.nsegments; i++) {
        records += s.segments[i].nblocks;
        if (i)
            fuzz_require(s.segments[i - 1].address <= s.segments[i].address, "segments are sorted by address");
    }
    fuzz_require(records <= size, "at most one record per input byte (%zu records, %zu bytes)", records, size);
    snapshot_free(&s);
    return 0;
}
