/* replay.h: replaying an allocation trace (a text trace or a PyTorch snapshot) through the allocator model
 * on a device, and checking the result against what the snapshot recorded. */
#ifndef OOMLAB_REPLAY_H
#define OOMLAB_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/allocator.h"
#include "alloc/snapshot.h"
#include "util/err.h"

enum replay_op {
    RP_ALLOC,
    RP_FREE,
    RP_EMPTY_CACHE,
    RP_RESET_PEAK,
    RP_RESET_ACCUMULATED,
    RP_RECORDED_SEGMENT_ALLOC, /* what the snapshot recorded (key = address, bytes = size): checked, not run */
    RP_RECORDED_SEGMENT_FREE,
};

struct replay_event {
    enum replay_op op;
    uint64_t key;    /* allocation identity: a text trace's ID (interned) or the recorded address */
    uint64_t bytes;  /* RP_ALLOC: requested bytes */
    uint64_t stream;
    size_t index;    /* position in the source: event index in device_traces, or line number of a text trace */
};

/* A segment that existed before the trace started, with the allocations then live in it. */
struct replay_segment {
    uint64_t address, size, stream;
    bool small;
    struct restore_block *blocks;
    uint64_t *keys; /* recorded address of each live block */
    size_t nblocks;
};


struct replay_input {
    const char *name;
    bool is_snapshot;
    struct replay_event *events;
    size_t nevents;
    struct replay_segment *initial; /* mid-run snapshots: the state at trace start */
    size_t ninitial;
    bool has_final;
    struct alloc_snapshot final; /* the file's final segments, to check the replay against */
    char **id_names; /* text traces: the ID behind each key */
    size_t nids;
    size_t skipped_events; /* snapshot events that are not replayed (free_requested, snapshot markers, ...) */
};

struct replay_options {
    bool same_addresses; /* new segments take the addresses recorded in segment_alloc events */
};

struct replay_oom {
    size_t event; /* index in the source */
    char message[1024];
};

struct replay_check {
    size_t segment_allocs_recorded, segment_allocs_matched;
    bool final_layout_matched;
    size_t final_segments, final_segments_matched; /* segments of the file's final state, and how many the model laid out alike */
    size_t allocs, addresses_matched;
    char first_mismatch[512];
};

struct replay_result {
    struct alloc_stats stats;
    struct replay_oom *ooms;
    size_t nooms;
    size_t frees_of_unknown; /* frees of allocations that failed or never existed (warned about) */
    size_t events_replayed;
    struct replay_check check; /* snapshots only */
    struct alloc_snapshot final; /* the model's segments at the end */
    char warnings[4][256];
    size_t nwarnings;
};

int text_trace_load(const char *path, struct replay_input *in, struct err *e);
int snapshot_replay_load(const char *path, struct replay_input *in, struct err *e);
void replay_input_free(struct replay_input *in);

/* Runs the input on a fresh allocator over dev (which must be fresh too). */
int replay_run(const struct replay_input *in, struct device *dev, const struct alloc_config *cfg,
               const struct replay_options *opt, struct replay_result *res, struct err *e);
void replay_result_free(struct replay_result *res);

#endif
