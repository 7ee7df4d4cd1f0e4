/* snapshot_out.h: a run written as a PyTorch memory snapshot, in the format
 * torch.cuda.memory._dump_snapshot() writes (a pickle: segments with their blocks, device_traces with
 * alloc / free_requested / free_completed / segment_alloc / segment_free / segment_map / segment_unmap /
 * oom events, allocator_settings), so pytorch.org/memory_viz opens what oomlab simulated and
 * `oomlab replay` of the file reproduces the run. A snapshot_recorder is a runner observer that keeps the
 * trace; each event's and block's frames name the module, the phase and the step ({"name": module tag,
 * "filename": phase, "line": step}). A path ending in .json gets torch.cuda.memory_snapshot()'s segment
 * list as JSON instead. */
#ifndef OOMLAB_SNAPSHOT_OUT_H
#define OOMLAB_SNAPSHOT_OUT_H

#include "run/runner.h"
#include "util/err.h"

struct snapshot_recorder;

struct snapshot_recorder *snapshot_recorder_create(void); /* NULL without host memory */
struct run_observer *snapshot_recorder_base(struct snapshot_recorder *s);
/* Writes the run so far (the allocator's state and the trace) to path, whole or not at all. */
int snapshot_recorder_write(struct snapshot_recorder *s, struct runner *r, const char *path, struct err *e);
void snapshot_recorder_destroy(struct snapshot_recorder *s);

#endif
