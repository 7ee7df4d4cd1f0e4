/* oom_storm.c: kind oom_storm: a resident allocation (the parameters), then round after round a step
 * that allocates until an OOM and recovers as training code does: the step's tensors are freed
 * (runner_recover keeps the resident ones), the cache is emptied, and the next step retries. After each
 * recovery memory_stats must be back at the baseline taken after the first empty_cache: allocated and
 * active bytes and counts, requested bytes, segments and reserved bytes; at the end, with the resident
 * allocation freed and the cache emptied, nothing may remain. */
#include <stdio.h>
#include <string.h>

#include "stress/stress_kind.h"

#define ROUND_MAX_ALLOCS (1u << 22)

/* The figures compared with the baseline (one per name below). */
#define STORM_FIGURES(X)                                                                                     \
    X(allocated_bytes) X(active_bytes) X(requested_bytes) X(reserved_bytes) X(allocation) X(active) X(segment) \
        X(inactive_split)

struct figures {
#define FIELD_OF(name) int64_t name;
    STORM_FIGURES(FIELD_OF)
#undef FIELD_OF
};

static struct figures take(const struct allocator *a)
{
    const struct alloc_stats *s = allocator_stats(a);
    struct figures f;
#define READ(name) f.name = s->name[STAT_ALL].current;
    STORM_FIGURES(READ)
#undef READ
    return f;
}

/* The first figure that differs from the baseline, written to why; false if none. */
static bool drifted(const struct figures *base, const struct figures *now, char *why, size_t len)
{
#define CMP(name)                                                                                            \
    if (base->name != now->name) {                                                                           \
        snprintf(why, len, #name ".all.current %lld, baseline %lld", (long long)now->name, (long long)base->name); \
        return true;                                                                                         \
    }
    STORM_FIGURES(CMP)
#undef CMP
    return false;
}

static bool keep_resident(void *user, uint64_t id, uint8_t category)
{
    (void)user, (void)id;
    return category == CAT_PARAM;
}

static int emit_plain(struct stress_ctx *c, enum op_kind kind, uint64_t id, struct err *e)
{
    return stress_emit(c, &(struct op){.kind = kind, .id = id}, e);
}

int stress_oom_storm(struct stress_ctx *c, struct err *e)
{
    const struct oom_storm_spec *s = &c->p->oom_storm;
    struct stress_result *r = c->res;
    const struct allocator *a = runner_allocator(c->run);
    uint64_t resident = 0;
    int rc = 0;
    if (s->resident && (rc = stress_alloc(c, s->resident, 0, CAT_PARAM, "resident", &resident, e)))
        return rc < 0 ? -1
                      : err_set(e, ERR_INPUT, "%s: oom_storm.resident (%llu bytes) does not fit the device", c->p->path,
                                (unsigned long long)s->resident);
    if (emit_plain(c, OP_EMPTY_CACHE, 0, e))
        return -1;
    struct figures base = take(a);
    char drift[256] = "", why[256] = "";
    bool inv = true, no_oom = false;
    for (int round = 1; round <= s->rounds && rc == 0; round++) {
        if (emit_plain(c, OP_STEP, (uint64_t)round, e))
            return -1;
        uint32_t n = 0;
        while (n < ROUND_MAX_ALLOCS) {
            uint64_t id;
            if ((rc = stress_alloc(c, stress_draw_size(c, &s->sizes), 0, CAT_ACTIVATION, "step", &id, e)))
                break;
            n++;
        }
        if (rc < 0)
            return -1;
        if (rc == 0) {
            no_oom = true;
            break;
        }
        /* except torch.OutOfMemoryError: del the step's tensors; torch.cuda.empty_cache(); retry */
        if (stress_recover(c, keep_resident, NULL, e) || emit_plain(c, OP_EMPTY_CACHE, 0, e))
            return -1;
        rc = 0;
        r->recoveries++;
        struct figures now = take(a);
        char here[200];
        if (drifted(&base, &now, here, sizeof here) && r->drifts++ == 0)
            snprintf(drift, sizeof drift, "round %d: %s", round, here);
        if (inv)
            inv = stress_invariants(a, why, sizeof why);
    }
    r->points[r->npoints++] = stress_point_now(c);
    stress_check(r, "an OOM every round", !no_oom && r->recoveries == (uint64_t)s->rounds,
                 "%llu of %d rounds reached an OOM%s", (unsigned long long)r->recoveries, s->rounds,
                 no_oom ? " (a round allocated 4194304 tensors without one: larger sizes)" : "");
    stress_check(r, "memory_stats back at the baseline after each recovery", r->drifts == 0, "%s",
                 r->drifts ? drift : "allocated, active, requested, reserved, segments, inactive splits");
    stress_check(r, "allocator invariants after each recovery", inv, "%s", inv ? "hold" : why);
    if ((resident && stress_free(c, resident, e)) || emit_plain(c, OP_EMPTY_CACHE, 0, e))
        return -1;
    struct figures end = take(a), zero;
    memset(&zero, 0, sizeof zero);
    bool leak = drifted(&zero, &end, why, sizeof why);
    stress_check(r, "nothing left after the last free and empty_cache", !leak, "%s", leak ? why : "all zero");
    return 0;
}
