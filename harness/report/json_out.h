/* json_out.h: JSON reports (jansson), written through util/output.h: a file whole or not at all, a
 * device or FIFO directly, never replacing what should not be. Stats keep PyTorch's memory_stats key names. */
#ifndef OOMLAB_JSON_OUT_H
#define OOMLAB_JSON_OUT_H

#include <jansson.h>

#include "alloc/snapshot.h"
#include "alloc/stats.h"
#include "util/err.h"

/* {"reserved_bytes.all.peak": N, ...} in Python's sorted key order */
json_t *json_memory_stats(const struct alloc_stats *s);
/* torch.cuda.memory_snapshot()'s list of segment dicts, keys as PyTorch names them. */
json_t *json_alloc_snapshot(const struct alloc_snapshot *snap);
/* Writes root to path ("-" = stdout) as util/output.h says; steals the reference. */
int json_write_file(const char *path, json_t *root, struct err *e);

#endif
