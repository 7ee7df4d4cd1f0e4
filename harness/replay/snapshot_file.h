/* snapshot_file.h: a PyTorch CUDA memory snapshot pickle, read without Python into the allocator's own
 * structs (alloc/snapshot.h's segments and blocks, alloc/allocator.h's trace events): every device's
 * segments with their blocks and trace of allocator events, and the allocator settings. Three layouts
 * are read: the dict written by torch.cuda.memory._dump_snapshot() (segments, device_traces, optional
 * allocator_settings; other keys such as external_annotations are ignored), the bare list of segments
 * of torch.cuda.memory_snapshot() (no trace, no settings), and the torch 2.0 dict whose blocks carry
 * `history` instead of `address`, where each block's address is its segment's address plus the sizes of
 * the blocks before it (a torch 2.0 bare list gets the same treatment and stays SNAP_FORMAT_SEGMENT_LIST).
 *
 * Each event, block and segment gets the site of its recorded stack (`frames`; a torch 2.0 live block:
 * the frames of its history entry at its address), folded while reading to the user's innermost frame
 * by replay/frame_site.h ("flex_opt.py:125 init_weight_list"), or NULL without frames. Sites are
 * interned: equal sites are one pointer, owned by the snapshot. History, time stamps and every other
 * field are not copied. Required keys and types are checked and a mismatch names its path in the file
 * ("FILE: segments[3].blocks[2].size: expected an int, got str"); optional keys: a block's
 * requested_size (0), a segment's is_expandable (false) and segment_pool_id ((0,0)), which torch 2.0
 * files lack, frames (no site), allocator_settings' PYTORCH_CUDA_ALLOC_CONF (NULL), and addr/size/stream
 * of events whose action oomlab does not know (0). Without allocator_settings the settings read as
 * PyTorch's defaults: expandable_segments false, max_split_size -1 (no limit), garbage_collection_threshold 0. */
#ifndef OOMLAB_SNAPSHOT_FILE_H
#define OOMLAB_SNAPSHOT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/allocator.h"
#include "alloc/snapshot.h"
#include "util/err.h"

enum snap_format { SNAP_FORMAT_DICT, SNAP_FORMAT_SEGMENT_LIST, SNAP_FORMAT_TORCH20 };

/* One device's part of the file. For ACT_OOM events, addr holds the event's device_free (free device bytes)
 * and size the rounded request; ACT_SNAPSHOT is a snapshot marker, ACT_OTHER an action oomlab does not know. */
struct snapshot_device {
    int device;
    struct segment_info *segments; size_t nsegments; /* sorted by address */
    struct alloc_trace_event *events; size_t nevents; /* device_traces[device], in order */
    const char **event_sites;                          /* each event's site, or NULL */
};

struct snapshot {
    enum snap_format format;
    struct snapshot_device *devices; size_t ndevices; /* each device with segments or a non-empty trace, by number */
    bool has_settings;                        /* allocator_settings present */
    char *alloc_conf;                         /* allocator_settings["PYTORCH_CUDA_ALLOC_CONF"] or NULL */
    bool expandable_segments; int64_t max_split_size; double garbage_collection_threshold;
    /* What the devices point into: every segment (by device, then address), every event and its site (in
     * device order), and the sites' text. */
    struct segment_info *segments; size_t nsegments;
    struct alloc_trace_event *events; const char **event_sites; size_t nevents;
    struct site_table *sites;
};

/* A recorded block in use: allocated, or freed by the program and waiting for its stream's work
 * (active_pending_free). */
static inline bool block_state_live(enum block_state s)
{
    return s == BLOCK_ACTIVE_ALLOCATED || s == BLOCK_ACTIVE_PENDING_FREE;
}

/* The device numbered `device`, or NULL when the file has nothing on it. */
const struct snapshot_device *snapshot_device(const struct snapshot *s, int device);

/* The largest snapshot file read (2 GiB); a parse needs a few times the file's size in memory. */
#define SNAPSHOT_MAX_BYTES (UINT64_C(2) << 30)

/* Reads and parses the file at `path`; messages start with the path. A parse creates at most one
 * segment, block or event, and folds at most one frame, per byte of input, however often the pickle
 * repeats a shared value. */
int snapshot_load(const char *path, struct snapshot *out, struct err *e);   /* 0 or -1 with e set (ERR_INPUT) */
/* Parses a pickle already in memory; `name` starts every message. On failure *out is left zeroed
 * (safe to pass to snapshot_free). */
int snapshot_parse(const char *name, const unsigned char *data, size_t len, struct snapshot *out, struct err *e);
/* snapshot_parse is these two: the trace read as the pickle is (pickle_parse_streamed), and, when the file
 * leaves the shape CPython's pickler gives it or anything is wrong (-1, no message), the file read whole into
 * a value tree and walked, which also says what is wrong. Apart for tests and fuzzing, which hold the two to
 * one result. */
int snapshot_parse_streamed(const char *name, const unsigned char *data, size_t len, struct snapshot *out);
int snapshot_parse_whole(const char *name, const unsigned char *data, size_t len, struct snapshot *out, struct err *e);
void snapshot_free(struct snapshot *s);

#endif
