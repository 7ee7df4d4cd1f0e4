/* json_out.c: memory_stats and snapshots as JSON, and writing a JSON document (see json_out.h). */
#include "report/json_out.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/output.h"

json_t *json_memory_stats(const struct alloc_stats *s)
{
    struct stat_entry all[ALLOC_STATS_NKEYS];
    size_t n = alloc_stats_flatten(s, all);
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, all[i].key, json_integer(all[i].value));
    return o;
}

json_t *json_alloc_snapshot(const struct alloc_snapshot *snap)
{
    static const char *const states[] = {"active_allocated", "active_pending_free", "inactive"};
    json_t *segs = json_array();
    for (size_t i = 0; i < snap->nsegments; i++) {
        const struct segment_info *s = &snap->segments[i];
        json_t *blocks = json_array();
        for (size_t k = 0; k < s->nblocks; k++) {
            const struct block_info *b = &s->blocks[k];
            json_array_append_new(blocks, json_pack("{s:I, s:I, s:I, s:s, s:[]}", "address", (json_int_t)b->address,
                                                    "size", (json_int_t)b->size, "requested_size",
                                                    (json_int_t)b->requested_size, "state", states[b->state],
                                                    "frames"));
        }
        json_array_append_new(
            segs, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:[i,i], s:b, s:[], s:o}", "device", 0,
                            "address", (json_int_t)s->address, "total_size", (json_int_t)s->total_size,
                            "allocated_size", (json_int_t)s->allocated_size, "active_size",
                            (json_int_t)s->active_size, "requested_size", (json_int_t)s->requested_size, "stream",
                            (json_int_t)s->stream, "segment_type", s->small ? "small" : "large", "segment_pool_id",
                            0, 0, "is_expandable", s->is_expandable, "frames", "blocks", blocks));
    }
    return segs;
}

int json_write_file(const char *path, json_t *root, struct err *e)
{
    if (!root)
        return err_set(e, ERR_INTERNAL, "out of host memory building JSON");
    struct output out;
    if (output_open(&out, path, e)) {
        json_decref(root);
        return -1;
    }
    int rc = json_dumpf(root, out.f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (rc == 0)
        fputc('\n', out.f);
    else if (!ferror(out.f)) { /* not a write error (those are reported by the commit, with their reason) */
        output_abort(&out);
        return err_set(e, ERR_INTERNAL, "%s: out of host memory writing JSON", path);
    }
    return output_commit(&out, e);
}
