/* advise.h: `oomlab advise`: every fix tried on a job, alone and in combinations, each proven by a full
 * run, and ranked: what fits first, then the highest modelled throughput, then the lowest peak reserved.
 * A fix that changes nothing in the job says why. For a snapshot or text trace, allocator settings are
 * tried instead, each with the least capacity and the smallest GPU profile it replays on, ranked by
 * that capacity. */
#ifndef OOMLAB_ADVISE_H
#define OOMLAB_ADVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "run/harness.h"

#define ADVICE_MAX 64

struct advice_entry {
    uint32_t fixes;          /* the fixes (bits of enum fix_id) added to the job */
    char settings[128];      /* a snapshot's allocator settings */
    struct job_result run;
    bool same_as_base;       /* the figures equal the base's: it changes nothing here */
    const char *inert;       /* the fix's own reason it changes nothing, or NULL */
    uint64_t least_capacity; /* a trace: the smallest device capacity it replays on without an OOM */
    char smallest_card[32];  /* a trace: the smallest GPU profile it replays on ("" if none) */
};

struct advice {
    struct job_result base;
    struct advice_entry recorded; /* a trace: under the settings it recorded */
    struct advice_entry entries[ADVICE_MAX]; /* ranked, best first */
    size_t n;
};

/* Tries the fixes on the scenario's "before" variant (or its first). */
int advise_scenario(const struct scenario *sc, const struct harness_options *opt, struct advice *out, struct err *e);
/* Tries allocator settings on a replayed snapshot or trace: its device cuda_device, or (-1) its only one. */
int advise_trace(const char *path, int cuda_device, struct advice *out, struct err *e);

#endif
