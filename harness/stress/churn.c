/* churn.c: kind churn: seeded random allocations and frees for N ops around a target occupancy (below
 * it allocate, above it free a random live block); an OOM is caught (the script goes on without that
 * tensor). The allocator is sampled at evenly spaced points: reserved - allocated (fragmentation) and
 * the largest free block. With burn_every, a GEMM runs every so many ops (burn.c). */
#include <stdlib.h>

#include "stress/stress_kind.h"

struct live {
    uint64_t id, bytes;
};

int stress_churn(struct stress_ctx *c, struct err *e)
{
    const struct churn_spec *ch = &c->p->churn;
    struct stress_result *r = c->res;
    uint64_t target = (uint64_t)(ch->occupancy * (double)r->device_free_start), held = 0;
    struct live *live = NULL;
    size_t nlive = 0, cap = 0;
    int rc = 0;
    char why[256] = "";
    bool inv = true;
    uint64_t every = ch->ops / (uint64_t)ch->points ? ch->ops / (uint64_t)ch->points : 1;
    struct stress_burn burn = {0};
    if (ch->burn_every && stress_burn_start(c, &burn, e))
        return -1;
    for (uint64_t k = 0; k < ch->ops && rc == 0; k++) {
        if (ch->burn_every && k % ch->burn_every == 0 && (rc = stress_burn_gemm(c, &burn, e)))
            break;
        if (held < target || nlive == 0) {
            uint64_t bytes = stress_draw_size(c, &ch->sizes), id;
            rc = stress_alloc(c, bytes, 0, CAT_ACTIVATION, "churn", &id, e);
            if (rc == 1) {
                rc = stress_recover(c, NULL, NULL, e); /* caught: the script goes on without it */
            } else if (rc == 0) {
                if (nlive == cap) {
                    struct live *grown = realloc(live, (cap = cap ? 2 * cap : 1024) * sizeof *live);
                    if (!grown) {
                        rc = err_set(e, ERR_INTERNAL, "out of host memory");
                        break;
                    }
                    live = grown;
                }
                live[nlive++] = (struct live){id, bytes};
                held += bytes;
            }
        } else {
            size_t i = (size_t)stress_random(c, nlive);
            held -= live[i].bytes;
            rc = stress_free(c, live[i].id, e);
            live[i] = live[--nlive];
        }
        const struct alloc_stats *st = allocator_stats(runner_allocator(c->run));
        uint64_t frag = (uint64_t)(st->reserved_bytes[STAT_ALL].current - st->allocated_bytes[STAT_ALL].current);
        if (frag > r->max_fragmentation)
            r->max_fragmentation = frag;
        if ((k + 1) % every == 0) { /* a point (the largest free block is a walk of the pools) */
            if (r->npoints < STRESS_MAX_POINTS)
                r->points[r->npoints++] = stress_point_now(c);
            if (inv)
                inv = stress_invariants(runner_allocator(c->run), why, sizeof why);
        }
    }
    free(live);
    if (rc || (ch->burn_every && stress_burn_end(c, &burn, e)))
        return -1;
    if (!r->npoints || r->points[r->npoints - 1].op != r->ops)
        r->points[r->npoints < STRESS_MAX_POINTS ? r->npoints++ : r->npoints - 1] = stress_point_now(c);
    if (inv)
        inv = stress_invariants(runner_allocator(c->run), why, sizeof why);
    stress_check(r, "allocator invariants at every point", inv, "%s", inv ? "hold" : why);
    stress_check(r, "every op ran", r->ops == ch->ops, "%llu of %llu ops", (unsigned long long)r->ops,
                 (unsigned long long)ch->ops);
    return 0;
}
