/* snapshot_same.h: whether two readings of one snapshot file agree field by field (sites by their text: each
 * reading interns its own), for the fuzz target and the test that hold the streamed reading to the whole one. */
#ifndef OOMLAB_SNAPSHOT_SAME_H
#define OOMLAB_SNAPSHOT_SAME_H

#include <string.h>

#include "replay/snapshot_file.h"

static inline bool same_site(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static inline bool same_segment(const struct segment_info *a, const struct segment_info *b)
{
    bool same = a->address == b->address && a->total_size == b->total_size && a->allocated_size == b->allocated_size &&
                a->active_size == b->active_size && a->requested_size == b->requested_size &&
                a->stream == b->stream && a->small == b->small && a->is_expandable == b->is_expandable &&
                a->device == b->device && a->segment_pool_id[0] == b->segment_pool_id[0] &&
                a->segment_pool_id[1] == b->segment_pool_id[1] && same_site(a->site, b->site) &&
                a->nblocks == b->nblocks;
    for (size_t k = 0; same && k < a->nblocks; k++)
        same = a->blocks[k].address == b->blocks[k].address && a->blocks[k].size == b->blocks[k].size &&
               a->blocks[k].requested_size == b->blocks[k].requested_size && a->blocks[k].state == b->blocks[k].state &&
               same_site(a->blocks[k].site, b->blocks[k].site);
    return same;
}

/* NULL when a and b agree, else what differs first ("event", "segment", ...), with its index in *at. */
static inline const char *snapshot_difference(const struct snapshot *a, const struct snapshot *b, size_t *at)
{
    *at = 0;
    if (a->format != b->format || a->ndevices != b->ndevices || a->nsegments != b->nsegments ||
        a->nevents != b->nevents)
        return "format or counts";
    if (a->has_settings != b->has_settings || !same_site(a->alloc_conf, b->alloc_conf) ||
        a->expandable_segments != b->expandable_segments || a->max_split_size != b->max_split_size ||
        memcmp(&a->garbage_collection_threshold, &b->garbage_collection_threshold, sizeof(double))) /* NaN too */
        return "settings";
    for (*at = 0; *at < a->ndevices; ++*at) {
        const struct snapshot_device *x = &a->devices[*at], *y = &b->devices[*at];
        if (x->device != y->device || x->nsegments != y->nsegments || x->nevents != y->nevents)
            return "device";
    }
    for (*at = 0; *at < a->nevents; ++*at) {
        const struct alloc_trace_event *x = &a->events[*at], *y = &b->events[*at];
        if (x->action != y->action || x->addr != y->addr || x->size != y->size || x->stream != y->stream ||
            !same_site(a->event_sites[*at], b->event_sites[*at]))
            return "event";
    }
    for (*at = 0; *at < a->nsegments; ++*at)
        if (!same_segment(&a->segments[*at], &b->segments[*at]))
            return "segment";
    return NULL;
}

#endif
