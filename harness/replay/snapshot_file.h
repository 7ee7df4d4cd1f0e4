/* snapshot_file.h: a PyTorch CUDA memory snapshot pickle, read without Python into plain C structs:
 * the segments with their blocks, one device's trace of allocator events, and the allocator settings.
 * Three layouts are read: the dict written by torch.cuda.memory._dump_snapshot() (segments,
 * device_traces, optional allocator_settings; other keys such as external_annotations are ignored),
 * the bare list of segments of torch.cuda.memory_snapshot() (no trace, no settings), and the torch
 * 2.0 dict whose blocks carry `history` instead of `address`, where each block's address is its
 * segment's address plus the sizes of the blocks before it (a torch 2.0 bare list gets the same
 * treatment and stays SNAP_FORMAT_SEGMENT_LIST). Device: the one all segments are on;
 * with no segments, the first device whose trace is non-empty, else 0. A snapshot with segments on
 * several devices yields device 0's segments and trace only. Frames, history, time stamps and every
 * other field are not copied. Required keys and types are checked and a mismatch names its path in
 * the file ("FILE: segments[3].blocks[2].size: expected an int, got str"); optional keys: a block's
 * requested_size (0), a segment's is_expandable (false) and segment_pool_id ((0,0)), which torch 2.0
 * files lack, allocator_settings' PYTORCH_CUDA_ALLOC_CONF (NULL), and addr/size/stream of events
 * whose action oomlab does not know (0). Without allocator_settings the settings read as PyTorch's
 * defaults: expandable_segments false, max_split_size -1 (no limit), garbage_collection_threshold 0. */
#ifndef OOMLAB_SNAPSHOT_FILE_H
#define OOMLAB_SNAPSHOT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

enum snap_block_state { SNAP_ACTIVE_ALLOCATED, SNAP_ACTIVE_PENDING_FREE, SNAP_INACTIVE };

struct snap_block {
    uint64_t address, size, requested_size;
    enum snap_block_state state;
};

struct snap_segment {
    uint64_t address, total_size, allocated_size, active_size, requested_size;
    uint64_t stream;          /* raw cudaStream_t value; 0 = default stream */
    bool small;               /* segment_type == "small" */
    bool is_expandable;
    int64_t pool_id[2];       /* segment_pool_id; (0,0) if absent */
    struct snap_block *blocks; size_t nblocks;
};

enum snap_action { SNAP_ALLOC, SNAP_FREE_REQUESTED, SNAP_FREE_COMPLETED, SNAP_SEGMENT_ALLOC, SNAP_SEGMENT_FREE,
                   SNAP_SEGMENT_MAP, SNAP_SEGMENT_UNMAP, SNAP_SNAPSHOT, SNAP_OOM, SNAP_OTHER };

/* For SNAP_OOM, addr holds the event's device_free (free device bytes) and size the rounded request. */
struct snap_event {
    enum snap_action action;
    uint64_t addr;
    uint64_t size;
    uint64_t stream;
};

enum snap_format { SNAP_FORMAT_DICT, SNAP_FORMAT_SEGMENT_LIST, SNAP_FORMAT_TORCH20 };

struct snapshot {
    enum snap_format format;
    int device;                               /* the device whose segments and trace were read */
    struct snap_segment *segments; size_t nsegments;   /* sorted by address */
    struct snap_event *events; size_t nevents;          /* device_traces[device], in order */
    bool has_settings;                        /* allocator_settings present */
    char *alloc_conf;                         /* allocator_settings["PYTORCH_CUDA_ALLOC_CONF"] or NULL */
    bool expandable_segments; int64_t max_split_size; double garbage_collection_threshold;
};

/* The largest snapshot file read (2 GiB); a parse needs a few times the file's size in memory. */
#define SNAPSHOT_MAX_BYTES (UINT64_C(2) << 30)

/* Reads and parses the file at `path`; messages start with the path. A parse creates at most one
 * segment, block or event per byte of input, however often the pickle repeats a shared value. */
int snapshot_load(const char *path, struct snapshot *out, struct err *e);   /* 0 or -1 with e set (ERR_INPUT) */
/* Parses a pickle already in memory; `name` starts every message. On failure *out is left zeroed
 * (safe to pass to snapshot_free). */
int snapshot_parse(const char *name, const unsigned char *data, size_t len, struct snapshot *out, struct err *e);
void snapshot_free(struct snapshot *s);

#endif
