/* gen_tensors_test.c: the generator's tensor slab (workload/gen.c): sizes at the 4 EiB limit for every
 * dtype (t_new2 and t_new: the limit is a shift by the dtype's size), partial products past it refused
 * even when a later dim is 0, negative dims an internal error; reference counts (t_ref, t_release's
 * inline drop) with one FREE at the last drop, and freed slots taken again. */
#include <stdint.h>

#include "tap.h"
#include "util/size.h"
#include "workload/gen.h"
#include "workload/map_array.h"
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
    for (int i = 0; i < 3000; i++)
        t_new2(&g, 1, 1, DT_U8, CAT_ACTIVATION, "many");
    ok(!g.failed && g.nt == 3001 && g.t[b].bytes == 20, "the slab grown past its first mapping, earlier tensors kept");
    is_int(g.live_bytes, 20 + 3000, "live bytes counted");
    gen_close(&g);
}

int main(void)
{
    limits();
    references();
    return done_testing();
}
