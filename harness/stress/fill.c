/* fill.c: kind fill: blocks of the profile's sizes allocated until the first OOM (or max_blocks); what
 * the allocator could hand out of the device (usable bytes against its capacity), reserved against
 * allocated at the end, and the number of blocks. */
#include "stress/stress_kind.h"

int stress_fill(struct stress_ctx *c, struct err *e)
{
    const struct fill_spec *f = &c->p->fill;
    struct stress_result *r = c->res;
    uint64_t requested = 0, last = 0;
    int rc = 0;
    while (r->blocks < f->max_blocks) {
        uint64_t id;
        last = stress_draw_size(c, &f->sizes);
        if ((rc = stress_alloc(c, last, 0, CAT_OTHER, "fill", &id, e)))
            break;
        r->blocks++;
        requested += last;
    }
    if (rc < 0)
        return -1;
    const struct allocator *a = runner_allocator(c->run);
    const struct alloc_stats *s = allocator_stats(a);
    r->ended_by_oom = rc == 1;
    r->oom_request = rc == 1 ? last : 0;
    r->usable_bytes = (uint64_t)s->allocated_bytes[STAT_ALL].current;
    r->requested_bytes = requested;
    r->end_allocated = r->usable_bytes;
    r->end_reserved = (uint64_t)s->reserved_bytes[STAT_ALL].current;
    char why[256] = "";
    stress_check(r, "ended by an OOM", r->ended_by_oom, "%s",
                 r->ended_by_oom ? "the next block did not fit" : "max_blocks reached first: raise it or the sizes");
    stress_check(r, "usable <= reserved <= capacity", r->usable_bytes <= r->end_reserved && r->end_reserved <= r->capacity,
                 "usable %llu, reserved %llu, capacity %llu", (unsigned long long)r->usable_bytes,
                 (unsigned long long)r->end_reserved, (unsigned long long)r->capacity);
    bool inv = stress_invariants(a, why, sizeof why);
    stress_check(r, "allocator invariants at the end", inv, "%s", inv ? "hold" : why);
    r->points[r->npoints++] = stress_point_now(c);
    return 0;
}
