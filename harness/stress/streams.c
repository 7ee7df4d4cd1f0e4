/* streams.c: kind streams: tensors produced on stream 0 and each used on one consumer stream in turn
 * (record_stream), freed `lifetime` productions later; a consumer stream synchronises after every
 * `sync_every` uses. A freed tensor's block waits for its consumer's sync before it can be reused
 * (alloc/stream_events.c), so reserved memory grows with the time between syncs. Checked at every op:
 * active - allocated bytes equal the blocks waiting for events; at the end, with every stream synchronised
 * and the cache emptied, nothing remains. */
#include <stdlib.h>

#include "stress/stress_kind.h"

static int emit(struct stress_ctx *c, enum op_kind kind, uint64_t id, int stream, struct err *e)
{
    struct op op = {.kind = kind, .id = id, .stream = stream};
    int rc = stress_emit(c, &op, e);
    if (rc == 0 && kind == OP_RECORD_STREAM)
        c->res->record_streams++;
    if (rc == 0 && kind == OP_SYNC)
        c->res->syncs++;
    return rc;
}

/* active - allocated must be exactly the bytes of blocks waiting for stream events. */
static bool pending_consistent(struct stress_ctx *c, char *why, size_t len)
{
    const struct allocator *a = runner_allocator(c->run);
    const struct alloc_stats *s = allocator_stats(a);
    uint64_t bytes = 0, blocks = allocator_pending_frees(a, &bytes);
    if (blocks > c->res->peak_pending_blocks)
        c->res->peak_pending_blocks = blocks;
    if (bytes > c->res->peak_pending_bytes)
        c->res->peak_pending_bytes = bytes;
    int64_t gap = s->active_bytes[STAT_ALL].current - s->allocated_bytes[STAT_ALL].current;
    if (gap == (int64_t)bytes)
        return true;
    snprintf(why, len, "op %llu: active - allocated = %lld bytes, but %llu bytes wait for stream events",
             (unsigned long long)c->res->ops, (long long)gap, (unsigned long long)bytes);
    return false;
}

int stress_streams(struct stress_ctx *c, struct err *e)
{
    const struct streams_spec *s = &c->p->streams;
    struct stress_result *r = c->res;
    uint64_t *ring = calloc((size_t)s->lifetime, sizeof *ring); /* ids produced, 0: none (or OOM) */
    uint64_t uses[8] = {0};
    if (!ring)
        return err_set(e, ERR_INTERNAL, "out of host memory");
    char why[256] = "";
    bool ok = true;
    int rc = 0;
    for (uint64_t k = 0; k < s->ops && rc == 0; k++) {
        size_t slot = (size_t)(k % (uint64_t)s->lifetime);
        if (ring[slot] && (rc = emit(c, OP_FREE, ring[slot], 0, e)))
            break;
        ring[slot] = 0;
        uint64_t id;
        rc = stress_alloc(c, stress_draw_size(c, &s->sizes), 0, CAT_ACTIVATION, "produced", &id, e);
        if (rc == 1) { /* caught: this production is skipped */
            rc = stress_recover(c, NULL, NULL, e);
            continue;
        }
        if (rc)
            break;
        ring[slot] = id;
        int consumer = 1 + (int)(k % (uint64_t)(s->streams - 1));
        if ((rc = emit(c, OP_RECORD_STREAM, id, consumer, e)))
            break;
        if (++uses[consumer] % (uint64_t)s->sync_every == 0 && (rc = emit(c, OP_SYNC, 0, consumer, e)))
            break;
        if (ok)
            ok = pending_consistent(c, why, sizeof why);
    }
    for (int i = 0; rc == 0 && i < s->lifetime; i++)
        if (ring[i])
            rc = emit(c, OP_FREE, ring[i], 0, e);
    free(ring);
    if (rc)
        return -1;
    if (ok)
        ok = pending_consistent(c, why, sizeof why);
    r->points[r->npoints++] = stress_point_now(c);
    stress_check(r, "active - allocated = bytes waiting for stream events", ok, "%s", ok ? "at every op" : why);
    bool inv = stress_invariants(runner_allocator(c->run), why, sizeof why);
    stress_check(r, "allocator invariants with blocks pending", inv, "%s", inv ? "hold" : why);
    for (int st = 1; st < s->streams; st++)
        if (emit(c, OP_SYNC, 0, st, e))
            return -1;
    if (emit(c, OP_EMPTY_CACHE, 0, 0, e))
        return -1;
    const struct alloc_stats *end = allocator_stats(runner_allocator(c->run));
    uint64_t pending = allocator_pending_frees(runner_allocator(c->run), NULL);
    bool empty = pending == 0 && end->active_bytes[STAT_ALL].current == 0 && end->reserved_bytes[STAT_ALL].current == 0;
    stress_check(r, "nothing left after every stream synchronised and empty_cache", empty,
                 "%llu blocks pending, active %lld bytes, reserved %lld bytes", (unsigned long long)pending,
                 (long long)end->active_bytes[STAT_ALL].current, (long long)end->reserved_bytes[STAT_ALL].current);
    return 0;
}
