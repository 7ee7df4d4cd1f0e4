/* gen_tensors_test.c: the generator's tensor slab (workload/gen.c): sizes at the 4 EiB limit for every
 * dtype (t_new2 and t_new: the limit is a shift by the dtype's size), partial products past it refused
 * even when a later dim is 0, negative dims an internal error; small dims (multiplied unchecked) exact at
 * their bound's edge and refused past it; reference counts (t_ref, t_release's
 * inline drop) with one FREE at the last drop, and freed slots taken again. */
#include <stdint.h>

#include "tap.h"
#include "util/size.h"
#include "workload/gen.h"
#include "util/map_array.h"
#include "workload/strpool.h"

struct rec_sink {
    struct op_sink base;
    int allocs, frees;
    uint64_t last_id, last_bytes, freed_id;
};

static int rec_emit(struct op_sink *base, const struct op *op, struct err *e)
{
    (void)e;
    struct rec_sink *s = (struct rec_sink *)base;
    if (op->kind == OP_ALLOC) {
        s->allocs++;
        s->last_id = op->id;
        s->last_bytes = op->bytes;
    } else if (op->kind == OP_FREE) {
        s->frees++;
        s->freed_id = op->id;
    }
    return 0;
}

static void gen_open(struct gen *g, struct err *e, struct rec_sink *s)
{
    *s = (struct rec_sink){.base = {.emit = rec_emit}};
    *g = (struct gen){.e = e, .mode = GEN_RUN, .sink = &s->base, .free_t = -1};
}

static void gen_close(struct gen *g)
{
    map_array_free(g->t, g->cap_t, sizeof *g->t);
}

static void limits(void)
{
    static const enum dtype dts[] = {DT_F32, DT_BF16, DT_F16, DT_U8, DT_I64};
    for (unsigned i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        const int64_t most = (int64_t)(SIZE_LIMIT / dtype_size(dts[i]));
        for (int generic = 0; generic < 2; generic++) {
            struct err e = {0};
            struct rec_sink s;
            struct gen g;
            gen_open(&g, &e, &s);
            int64_t d[3] = {most / 4, 4, 1};
            tref x = generic ? t_new(&g, d, 3, dts[i], CAT_ACTIVATION, "x") : t_new2(&g, most / 4, 4, dts[i], CAT_ACTIVATION, "x");
            ok(x != TNONE && !g.failed && s.last_bytes == SIZE_LIMIT, "%s %s: 2^62 bytes fit", dtype_name(dts[i]),
               generic ? "t_new" : "t_new2");
            d[0] = most / 4 + 1;
            x = generic ? t_new(&g, d, 3, dts[i], CAT_ACTIVATION, "y") : t_new2(&g, most / 4 + 1, 4, dts[i], CAT_ACTIVATION, "y");
            ok(g.failed && e.code == ERR_INPUT && s.allocs == 1 && x != TNONE && g.t[x].bytes == dtype_size(dts[i]),
               "  four elements more: refused (an input error, no ALLOC), kept as one element (%s)", e.msg);
            gen_close(&g);
        }
    }
    struct err e = {0};
    struct rec_sink s;
    struct gen g;
    gen_open(&g, &e, &s);
    int64_t d[3] = {INT64_C(1) << 61, 4, 0};
    t_new(&g, d, 3, DT_U8, CAT_ACTIVATION, "z");
    ok(g.failed && e.code == ERR_INPUT, "a partial product past the limit is refused though the last dim is 0");
    gen_close(&g);
    gen_open(&g, &e, &s);
    e = (struct err){0};
    t_new2(&g, 3, -2, DT_F32, CAT_ACTIVATION, "neg");
    ok(g.failed && e.code == ERR_INTERNAL, "a negative dim: an internal error (%s)", e.msg);
    gen_close(&g);
}

/* Dims under gen.c's per-dim bound (2^56 elements over all dims) are multiplied without a check each: at the
 * bound's edge the counts are exact, and past it (a product that wraps 64 bits, or passes the limit) refused. */
static void small_dims(void)
{
    static const int64_t bound[5] = {0, INT64_C(1) << 56, INT64_C(1) << 28, INT64_C(1) << 18, INT64_C(1) << 14};
    for (int nd = 1; nd <= 4; nd++) {
        struct err e = {0};
        struct rec_sink s;
        struct gen g;
        gen_open(&g, &e, &s);
        int64_t d[4];
        uint64_t want = 2;
        for (int i = 0; i < nd; i++) {
            d[i] = bound[nd] - 1;
            want *= (uint64_t)d[i];
        }
        tref x = t_new(&g, d, nd, DT_BF16, CAT_ACTIVATION, "edge");
        ok(!g.failed && s.last_bytes == want && t_numel(&g, x) == (int64_t)(want / 2),
           "%d dims of 2^%d - 1, bf16: %llu bytes", nd, __builtin_ctzll((uint64_t)bound[nd]), (unsigned long long)want);
        for (int i = 0; i < nd; i++)
            d[i] = bound[nd];
        t_new(&g, d, nd, DT_U8, CAT_ACTIVATION, "bound");
        ok(!g.failed && s.last_bytes == UINT64_C(1) << (nd * __builtin_ctzll((uint64_t)bound[nd])),
           "  %d dims at the bound, u8: counted the checked way, still exact", nd);
        gen_close(&g);
    }
    struct err e = {0};
    struct rec_sink s;
    struct gen g;
    gen_open(&g, &e, &s);
    int64_t wrap[4] = {INT64_C(1) << 16, INT64_C(1) << 16, INT64_C(1) << 16, INT64_C(1) << 16};
    t_new(&g, wrap, 4, DT_U8, CAT_ACTIVATION, "wrap");
    ok(g.failed && e.code == ERR_INPUT && s.allocs == 0, "four dims of 2^16 (a product that wraps to 0): refused");
    gen_close(&g);
    gen_open(&g, &e, &s);
    e = (struct err){0};
    t_new2(&g, INT64_C(1) << 30, INT64_C(1) << 30, DT_I64, CAT_ACTIVATION, "big");
    ok(g.failed && e.code == ERR_INPUT && s.allocs == 0, "2^30 x 2^30 i64 (2^63 bytes, no wrap): refused");
    gen_close(&g);
    gen_open(&g, &e, &s);
    e = (struct err){0};
    int64_t neg[3] = {2, -1, 3};
    t_new(&g, neg, 3, DT_F32, CAT_ACTIVATION, "neg");
    ok(g.failed && e.code == ERR_INTERNAL && s.allocs == 0, "a negative dim among small ones: an internal error");
    gen_close(&g);
}

static void references(void)
{
    struct err e = {0};
    struct rec_sink s;
    struct gen g;
    gen_open(&g, &e, &s);
    tref a = t_new2(&g, 2, 3, DT_BF16, CAT_ACTIVATION, "a");
    uint64_t id = s.last_id;
    is_u64(s.last_bytes, 12, "2 x 3 bf16: 12 bytes");
    t_ref(&g, a);
    t_release(&g, a);
    is_int(s.frees, 0, "one of two references dropped: no FREE");
    t_release(&g, a);
    ok(s.frees == 1 && s.freed_id == id, "the last dropped: its FREE");
    t_release(&g, TNONE);
    is_int(s.frees, 1, "dropping no tensor: nothing");
    tref b = t_new2(&g, 5, 1, DT_F32, CAT_ACTIVATION, "b");
    ok(b == a && s.last_id == id + 1, "a freed slot is taken again, under a new id");
    tref p = t_new2(&g, 1, 1, DT_U8, CAT_ACTIVATION, "p"), q = t_new2(&g, 1, 1, DT_U8, CAT_ACTIVATION, "q");
    t_release(&g, p);
    t_release(&g, q); /* q's slot now links to p's */
    tref r = t_new2(&g, 1, 1, DT_U8, CAT_ACTIVATION, "r");
    ok(r == q && g.t[q].param == -1 && g.t[q].refs == 1 && g.t[q].holds == 0 && g.free_t == p,
       "  taken again: no parameter (the word held the free list's link to %d), one reference", p);
    t_release(&g, r);
    for (int i = 0; i < 3000; i++)
        t_new2(&g, 1, 1, DT_U8, CAT_ACTIVATION, "many");
    ok(!g.failed && g.nt == 3001 && g.t[b].bytes == 20, "the slab grown past its first mapping, earlier tensors kept");
    is_int(g.live_bytes, 20 + 3000, "live bytes counted");
    gen_close(&g);
}

int main(void)
{
    limits();
    small_dims();
    references();
    return done_testing();
}
