/* stress_ops.c: what every stress generator uses (stress_kind.h): emitting ops into the runner and
 * telling an OOM from an error, seeded sizes, points and checks, and the allocator's invariants. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "alloc/snapshot.h"
#include "stress/stress_kind.h"

int stress_emit(struct stress_ctx *c, const struct op *op, struct err *e)
{
    struct op_sink *sink = runner_sink(c->run);
    if (sink->emit(sink, op, e) == 0) {
        c->res->ops++;
        return 0;
    }
    if (op->kind == OP_ALLOC && runner_stopped_by_oom(c->run)) {
        c->res->ops++;
        c->res->ooms++;
        return 1;
    }
    return -1;
}

int stress_alloc(struct stress_ctx *c, uint64_t bytes, int stream, enum category cat, const char *tag, uint64_t *id,
                 struct err *e)
{
    *id = ++c->next_id;
    struct op op = {.kind = OP_ALLOC, .id = *id, .bytes = bytes, .stream = stream, .category = (uint8_t)cat,
                    .name = tag};
    return stress_emit(c, &op, e);
}

int stress_free(struct stress_ctx *c, uint64_t id, struct err *e)
{
    return stress_emit(c, &(struct op){.kind = OP_FREE, .id = id}, e);
}

static bool keep_all(void *user, uint64_t id, uint8_t category)
{
    (void)user, (void)id, (void)category;
    return true;
}

int stress_recover(struct stress_ctx *c, bool (*keep)(void *user, uint64_t id, uint8_t category), void *user,
                   struct err *e)
{
    return runner_recover(c->run, keep ? keep : keep_all, user, e);
}

/* splitmix64 (Steele, Lea, Flood 2014): small, fast, and the same sequence everywhere. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t stress_random(struct stress_ctx *c, uint64_t n)
{
    return n ? next_random(&c->rng) % n : 0;
}

uint64_t stress_draw_size(struct stress_ctx *c, const struct size_spec *s)
{
    uint64_t k = c->drawn++;
    switch (s->distribution) {
    case DIST_FIXED: return s->size;
    case DIST_UNIFORM: return s->min + stress_random(c, s->max - s->min + 1);
    case DIST_LOG_UNIFORM: {
        double u = (double)(next_random(&c->rng) >> 11) / 9007199254740992.0; /* [0, 1) with 53 bits */
        double lo = log((double)s->min), hi = log((double)s->max + 1.0);
        uint64_t v = (uint64_t)exp(lo + u * (hi - lo));
        return v < s->min ? s->min : v > s->max ? s->max : v;
    }
    case DIST_MIX: return s->mix[k % (uint64_t)s->nmix];
    case DIST_SNAPSHOT: {
        uint64_t r = stress_random(c, s->hist_total);
        for (size_t i = 0; i < s->nhist; i++) {
            if (r < s->hist_counts[i])
                return s->hist_sizes[i];
            r -= s->hist_counts[i];
        }
        return s->hist_sizes[s->nhist - 1];
    }
    }
    return s->size;
}

struct stress_point stress_point_now(struct stress_ctx *c)
{
    const struct allocator *a = runner_allocator(c->run);
    const struct alloc_stats *s = allocator_stats(a);
    return (struct stress_point){.op = c->res->ops,
                                 .allocated = (uint64_t)s->allocated_bytes[STAT_ALL].current,
                                 .reserved = (uint64_t)s->reserved_bytes[STAT_ALL].current,
                                 .largest_free = allocator_largest_free_block(a),
                                 .ooms = c->res->ooms};
}

void stress_check(struct stress_result *r, const char *what, bool ok, const char *fmt, ...)
{
    if (r->nchecks == STRESS_MAX_CHECKS)
        return;
    struct stress_check *k = &r->checks[r->nchecks++];
    snprintf(k->what, sizeof k->what, "%s", what);
    k->ok = ok;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->detail, sizeof k->detail, fmt, ap);
    va_end(ap);
}

bool stress_ok(const struct stress_result *s)
{
    for (int i = 0; i < s->nchecks; i++)
        if (!s->checks[i].ok)
            return false;
    return true;
}

bool stress_invariants(const struct allocator *a, char *why, size_t len)
{
    if (alloc_check_consistency(a, why, len))
        return false;
    const struct alloc_stats *s = allocator_stats(a);
    for (int t = 0; t < STAT_TYPES; t++) {
        int64_t alloc = s->allocated_bytes[t].current, active = s->active_bytes[t].current;
        int64_t reserved = s->reserved_bytes[t].current, requested = s->requested_bytes[t].current;
        if (alloc < 0 || alloc > active || active > reserved || requested > active) {
            snprintf(why, len,
                     "pool %d: allocated %lld, active %lld, reserved %lld, requested %lld: not "
                     "0 <= allocated <= active <= reserved with requested <= active",
                     t, (long long)alloc, (long long)active, (long long)reserved, (long long)requested);
            return false;
        }
        if (s->reserved_bytes[t].peak < reserved || s->allocated_bytes[t].peak < alloc ||
            s->segment[t].peak < s->segment[t].current) {
            snprintf(why, len, "pool %d: a peak below its current value", t);
            return false;
        }
    }
    return true;
}
