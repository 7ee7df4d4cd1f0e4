/* holders_test.c: what holds the memory, and memory at the points of a step. Tags fold their first numeric component (the layer index); a
 * worked trace gives the holders at the peak (two 10 MiB layers as one 20 MiB holder, a 5 MiB param, a
 * 2 MiB cache), the holders at the OOM on a 64 MiB device, and the leak: a cache that grows 2 MiB at every
 * step from step 1 on, but not the optimizer state that appears once in step 1. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "device/device_kind.h"
#include "replay/replay.h"
#include "run/holders.h"
#include "sim_runner.h"
#include "tap.h"
#include "util/size.h"

static struct job_result res; /* large: not on the stack */

static void fold(const char *tag, const char *want)
{
    char got[HOLDER_TAG_MAX];
    size_t n = holders_fold_tag(tag, got, sizeof got);
    is_str(got, want, "fold '%s'", tag);
    is_u64(n, strlen(want), "  its length returned");
}

/* Replays text (through a file) on the default unbounded device, or on one of `capacity`. */
static int replay_text(const char *text, const char *capacity, struct err *e)
{
    char path[] = "/tmp/oomlab-holders-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return err_set(e, ERR_INTERNAL, "mkstemp");
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    struct replay_options opt = {0};
    if (capacity && capacity_parse(capacity, &opt.capacity, e))
        return -1;
    struct job_result *jobs = NULL;
    size_t n = 0;
    int rc = replay_path(path, &opt, &jobs, &n, e);
    if (rc == 0)
        res = jobs[0];
    free(jobs);
    unlink(path);
    return rc;
}

static const char trace[] = "step 1 samples 1\n"
                            "phase forward\n"
                            "alloc a 10MiB 0 activation model.layer.0.ffn\n"
                            "alloc b 10MiB 0 activation model.layer.1.ffn\n"
                            "alloc c 5MiB 0 param emb\n"
                            "alloc k1 2MiB 0 other cache\n"
                            "free a\nfree b\n"
                            "phase optimizer\n"
                            "alloc s 4MiB 0 optimizer_state adam.exp_avg\n"
                            "step 2 samples 1\n"
                            "phase forward\n"
                            "alloc k2 2MiB 0 other cache\n"
                            "step 3 samples 1\n"
                            "phase forward\n"
                            "alloc k3 2MiB 0 other cache\n";

/* A runner on the sim with holders observing it. */
struct fixture {
    struct device *dev;
    struct runner *r;
    struct holders *hs;
};

static bool fixture_open(struct fixture *f, const struct runner_options *opt, struct err *e)
{
    *f = (struct fixture){0};
    f->dev = device_open("sim", &(struct device_open_options){0}, e);
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    f->r = f->dev ? runner_create(f->dev, &cfg, opt) : NULL;
    f->hs = holders_create();
    if (ok(f->r && f->hs && runner_add_observer(f->r, holders_base(f->hs)) == 0, "a runner on sim with holders"))
        return true;
    diag("%s", e->msg);
    return false;
}

static void fixture_close(struct fixture *f)
{
    runner_destroy(f->r);
    holders_destroy(f->hs);
    if (f->dev)
        f->dev->ops->destroy(f->dev);
}

/* Where names may change (a text trace's), holders are known by a tag's text, not its pointer: one buffer
 * rewritten between allocations names two holders, and one tag in two categories is two holders. Where names
 * are stable (a generated program's rules: runner options NULL), a pointer's text is read once: the rewrite,
 * outside that contract, shows it is not read again (every allocation stays under enc.*.attn). */
static void test_reused_buffer(bool stable)
{
    struct err e = {0};
    struct fixture f;
    if (!fixture_open(&f, stable ? NULL : &(struct runner_options){0}, &e))
        return;
    struct runner *r = f.r;
    struct holders *hs = f.hs;
    char tag[32] = "enc.0.attn";
    struct op_sink *sink = runner_sink(r);
    struct op op = {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 1, .bytes = 3 * MiB, .name = tag};
    bool emitted = sink->emit(sink, &op, &e) == 0;
    op.id = 2;
    emitted = emitted && sink->emit(sink, &op, &e) == 0;
    strcpy(tag, "enc.1.mlp");
    op.id = 3;
    op.bytes = 2 * MiB;
    emitted = emitted && sink->emit(sink, &op, &e) == 0;
    op.id = 4;
    op.category = CAT_GRAD;
    emitted = emitted && sink->emit(sink, &op, &e) == 0;
    ok(emitted, "four allocations, three under one pointer");
    struct holders_result out;
    ok(holders_finish(hs, &out) == 0, "holders finish");
    const struct holders_view *v = &out.at_peak;
    if (stable)
        ok(v->n == 2 && !strcmp(v->top[0].tag, "enc.*.attn") && v->top[0].bytes == 8 * MiB &&
               v->top[0].count == 3 && !strcmp(v->top[1].tag, "enc.*.attn") && v->top[1].category == CAT_GRAD,
           "stable names: the attention's 8 MiB of activations, then its 2 MiB of grads (%zu holders)", v->n);
    else
        ok(v->n == 3 && !strcmp(v->top[0].tag, "enc.*.attn") && v->top[0].bytes == 6 * MiB &&
               v->top[0].count == 2 && !strcmp(v->top[1].tag, "enc.*.mlp") && !strcmp(v->top[2].tag, "enc.*.mlp") &&
               v->top[1].category != v->top[2].category,
           "the attention's 6 MiB, then the rewritten tag's 2 MiB in each category (%zu holders)", v->n);
    fixture_close(&f);
}

/* Under stable names, allocations in a row under one tag pointer go to one holder while the phase and the
 * category stay (the holders keep the last one at hand), and to another as either changes. */
static void test_same_tag_in_a_row(void)
{
    struct err e = {0};
    struct fixture f;
    if (!fixture_open(&f, NULL, &e))
        return;
    static const char tag[] = "enc.0.attn";
    struct op ops[] = {{.kind = OP_PHASE, .name = "forward"},
                       {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 1, .bytes = MiB, .name = tag},
                       {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 2, .bytes = MiB, .name = tag},
                       {.kind = OP_PHASE, .name = "backward"},
                       {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 3, .bytes = 2 * MiB, .name = tag},
                       {.kind = OP_ALLOC, .category = CAT_GRAD, .id = 4, .bytes = 4 * MiB, .name = tag}};
    ok(emit_ops(f.r, ops, sizeof ops / sizeof ops[0], &e),
       "four allocations under one pointer, in two phases and two categories");
    struct holders_result out;
    ok(holders_finish(f.hs, &out) == 0, "holders finish");
    const struct holders_view *v = &out.at_peak;
    ok(v->n == 3, "three holders (%zu)", v->n);
    if (v->n == 3) {
        ok(v->top[0].bytes == 4 * MiB && v->top[0].category == CAT_GRAD && !strcmp(v->top[0].phase, "backward"),
           "the grads, 4 MiB in backward");
        ok(v->top[1].bytes == 2 * MiB && v->top[1].count == 2 && !strcmp(v->top[1].phase, "forward"),
           "forward's two activations, 2 MiB");
        ok(v->top[2].bytes == 2 * MiB && v->top[2].count == 1 && !strcmp(v->top[2].phase, "backward"),
           "backward's one activation, 2 MiB");
    }
    fixture_close(&f);
}

/* A snapshot's address allocated again while live (lenient ids): the runner frees the earlier block, and its
 * bytes leave their holder. 1 MiB under a, the address again with 3 MiB under b, then 2 MiB under c: the
 * peak holds 5 MiB, b's and c's, not a's too. */
static void test_reallocated_live(void)
{
    struct err e = {0};
    struct fixture f;
    if (!fixture_open(&f, &(struct runner_options){.lenient_ids = true, .where_unit = "event"}, &e))
        return;
    struct op ops[] = {{.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 7, .bytes = 1 * MiB, .name = "a"},
                       {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 7, .bytes = 3 * MiB, .name = "b"},
                       {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 8, .bytes = 2 * MiB, .name = "c"}};
    ok(emit_ops(f.r, ops, sizeof ops / sizeof ops[0], &e),
       "an address allocated again while live is taken (lenient ids)");
    struct holders_result out;
    ok(holders_finish(f.hs, &out) == 0, "holders finish");
    const struct holders_view *v = &out.at_peak;
    ok(v->n == 2 && v->total == 5 * MiB && !strcmp(v->top[0].tag, "b") && v->top[0].bytes == 3 * MiB &&
           !strcmp(v->top[1].tag, "c"),
       "at the peak b's 3 MiB and c's 2 MiB, 5 MiB in all (%zu holders, %llu bytes)", v->n,
       (unsigned long long)v->total);
    fixture_close(&f);
}

/* More tag pointers than are remembered (65536): they are forgotten and met afresh, and every allocation
 * still lands in its holder, whether names are stable (the folds kept by pointer) or not (the texts read);
 * an allocation without a name is held by "-". */
static void test_many_pointers(bool stable)
{
    enum { N = 70000 };
    static char tags[N][16];
    struct err e = {0};
    struct fixture f;
    if (!fixture_open(&f, stable ? NULL : &(struct runner_options){0}, &e))
        return;
    struct runner *r = f.r;
    struct holders *hs = f.hs;
    struct op_sink *sink = runner_sink(r);
    bool emitted = true;
    for (int k = 0; k < N && emitted; k++) {
        snprintf(tags[k], sizeof tags[k], k % 2 ? "odd.%d.x" : "even.%d.x", k);
        struct op op = {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = (uint64_t)k + 1, .bytes = 512,
                        .name = tags[k]};
        emitted = sink->emit(sink, &op, &e) == 0;
    }
    struct op unnamed = {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = N + 1, .bytes = 512};
    emitted = emitted && sink->emit(sink, &unnamed, &e) == 0;
    ok(emitted, "%s names: 70000 allocations, each under its own tag pointer, and one without", stable ? "stable" : "changing");
    struct holders_result out;
    ok(holders_finish(hs, &out) == 0, "holders finish");
    const struct holders_view *v = &out.at_peak;
    ok(v->n == 3 && !strcmp(v->top[0].tag, "even.*.x") && v->top[0].count == N / 2 && v->top[0].bytes == 512 * N / 2 &&
           !strcmp(v->top[1].tag, "odd.*.x") && v->top[1].count == N / 2 && !strcmp(v->top[2].tag, "-") &&
           v->top[2].count == 1,
       "two holders of 35000 allocations each, and '-' of one (%zu holders)", v->n);
    fixture_close(&f);
}

/* The peak passed, then the holders change: each keeps its state at the peak once (the view at the end is
 * the peak's, whatever came after). Forty holders (more than a capture per peak passed would walk) of 1 MiB
 * each; a first peak of 41 MiB with 1 MiB under "a" is passed, a higher one of 42 MiB (2 MiB under "a") is
 * reached and passed; then 100000 allocations and frees of 512 bytes churn "a" and a holder made after the
 * peak, "late", and "a" drops to nothing: the peak holds 42 MiB, "a" its 2 MiB in 2 blocks, and no "late". */
static void test_changes_after_peak(void)
{
    enum { KEYS = 40, CHURN = 100000 };
    static char tags[KEYS][16];
    struct err e = {0};
    struct fixture f;
    if (!fixture_open(&f, NULL, &e))
        return;
    struct op_sink *sink = runner_sink(f.r);
    bool emitted = true;
    uint64_t id = 0;
#define EMIT(...) (emitted = emitted && sink->emit(sink, &(struct op){__VA_ARGS__}, &e) == 0)
    for (int k = 0; k < KEYS; k++) {
        snprintf(tags[k], sizeof tags[k], "h%d", k);
        EMIT(.kind = OP_ALLOC, .category = CAT_PARAM, .id = ++id, .bytes = MiB, .name = tags[k]);
    }
    EMIT(.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 1001, .bytes = MiB, .name = "a"); /* 41 MiB */
    EMIT(.kind = OP_FREE, .id = 1001);                                                        /* passed */
    EMIT(.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 1002, .bytes = MiB, .name = "a");
    EMIT(.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 1003, .bytes = MiB, .name = "a"); /* 42 MiB */
    EMIT(.kind = OP_FREE, .id = 1002);                                                        /* passed */
    for (uint64_t i = 0; i < CHURN && emitted; i++) {
        EMIT(.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 2000 + i, .bytes = 512, .name = i % 2 ? "a" : "late");
        EMIT(.kind = OP_FREE, .id = 2000 + i);
    }
    EMIT(.kind = OP_FREE, .id = 1003);
#undef EMIT
    ok(emitted, "40 holders, two peaks passed, then 200000 changes");
    struct holders_result out;
    ok(holders_finish(f.hs, &out) == 0, "holders finish");
    const struct holders_view *v = &out.at_peak;
    ok(v->seen && v->total == 42 * MiB && v->n == HOLDERS_TOP, "the view at the 42 MiB peak (%llu bytes, %zu holders)",
       (unsigned long long)v->total, v->n);
    bool late = false;
    for (size_t i = 0; i < v->n; i++)
        late |= !strcmp(v->top[i].tag, "late");
    ok(v->n && !strcmp(v->top[0].tag, "a") && v->top[0].bytes == 2 * MiB && v->top[0].count == 2 && !late,
       "'a' first with its 2 MiB in 2 blocks, then 1 MiB holders; no 'late' (first: %s)", v->n ? v->top[0].tag : "-");
    fixture_close(&f);
}

/* Blocks live at a recording's start are held "before recording" by their site (NULL: "-") and leave their
 * holder when freed; holders keep no index of their own, so a second observer keeping notes is refused. 4 MiB
 * at a site, 2 MiB without one, then 1 MiB allocated in forward: the peak holds 7 MiB, before the site's
 * block is freed; at the end 3 MiB. */
static void test_restored(void)
{
    struct err e = {0};
    struct fixture f;
    if (!fixture_open(&f, &(struct runner_options){.lenient_ids = true, .where_unit = "event"}, &e))
        return;
    const struct restore_block blocks[] = {{0, 4 * MiB, 4 * MiB}, {4 * MiB, 2 * MiB, 2 * MiB}};
    const char *const names[] = {"model.py:12 __init__", NULL};
    uint64_t addr;
    ok(runner_restore_segment(f.r, 20 * MiB, 0, false, blocks, (const uint64_t[]){100, 200}, names, 2, &addr, &e) == 0,
       "a segment of two live blocks restored");
    struct op ops[] = {{.kind = OP_PHASE, .name = "forward"},
                       {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 7, .bytes = 1 * MiB, .name = "x"},
                       {.kind = OP_FREE, .id = 100}};
    ok(emit_ops(f.r, ops, sizeof ops / sizeof ops[0], &e), "an allocation, then the site's block freed");
    struct holders *other = holders_create();
    ok(other && runner_add_observer(f.r, holders_base(other)) == -1, "a second observer with on_tensor is refused");
    holders_destroy(other);
    struct holders_result out;
    ok(holders_finish(f.hs, &out) == 0, "holders finish");
    const struct holders_view *v = &out.at_peak;
    ok(v->n == 3 && v->total == 7 * MiB && !strcmp(v->top[0].tag, "model.py:12 __init__") &&
           v->top[0].bytes == 4 * MiB && !strcmp(v->top[0].phase, "before recording") &&
           v->top[0].category == CAT_OTHER && !strcmp(v->top[1].tag, "-") && v->top[1].bytes == 2 * MiB &&
           !strcmp(v->top[1].phase, "before recording") && !strcmp(v->top[2].tag, "x") &&
           !strcmp(v->top[2].phase, "forward"),
       "at the peak 7 MiB: the site's 4 and the unnamed 2 before recording, x's 1 in forward (%zu holders, %llu "
       "bytes)", v->n, (unsigned long long)v->total);
    fixture_close(&f);
}

/* After an OOM that ends the run, runner_recover frees what the script drops: its bytes leave their holders,
 * so a later peak is the kept tensors' and the new ones'. 8 MiB of params kept, 8 MiB of activations dropped
 * after a 16 MiB request OOMs on 24 MiB; then 12 MiB more: the new peak is 20 MiB, params and the 12. */
static bool keep_params(void *user, uint64_t id, uint8_t category)
{
    return category == CAT_PARAM;
}

static void test_recovered(void)
{
    struct err e = {0};
    struct fixture f = {0};
    f.r = sim_runner("24MiB", &f.dev, &e);
    f.hs = holders_create();
    if (!ok(f.r && f.hs && runner_add_observer(f.r, holders_base(f.hs)) == 0, "a runner on 24 MiB with holders")) {
        diag("%s", e.msg);
        fixture_close(&f);
        return;
    }
    struct op_sink *sink = runner_sink(f.r);
    struct op ops[] = {{.kind = OP_ALLOC, .category = CAT_PARAM, .id = 1, .bytes = 8 * MiB, .name = "w"},
                       {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 2, .bytes = 8 * MiB, .name = "act"},
                       {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 3, .bytes = 16 * MiB, .name = "big"}};
    ok(emit_ops(f.r, ops, 2, &e) && sink->emit(sink, &ops[2], &e) != 0 && runner_stopped_by_oom(f.r),
       "16 MiB more OOMs");
    ok(runner_recover(f.r, keep_params, NULL, &e) == 0, "recovered, the activation dropped");
    struct op again = {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = 4, .bytes = 12 * MiB, .name = "retry"};
    ok(sink->emit(sink, &again, &e) == 0, "12 MiB then fit");
    struct holders_result out;
    ok(holders_finish(f.hs, &out) == 0, "holders finish");
    ok(out.at_oom.seen && out.at_oom.total == 16 * MiB && out.at_oom.n == 2, "at the OOM: w and act, 16 MiB");
    const struct holders_view *v = &out.at_peak;
    ok(v->n == 2 && v->total == 20 * MiB && !strcmp(v->top[0].tag, "retry") && v->top[0].bytes == 12 * MiB &&
           !strcmp(v->top[1].tag, "w"),
       "at the peak 20 MiB: retry's 12 and w's 8, not the dropped act (%zu holders, %llu bytes)", v->n,
       (unsigned long long)v->total);
    fixture_close(&f);
}

/* Holders by phase past 64 phase names: phase pK allocates 2(K + 1) MiB (whole 2 MiB pages: no rounding) under
 * one tag, for K up to 69; the largest eight are p69's 140 MiB down to p62's 126 MiB, each in its own phase. */
static void test_many_phases(void)
{
    struct err e = {0};
    struct fixture f;
    if (!fixture_open(&f, NULL, &e))
        return;
    static char names[70][8];
    struct op_sink *sink = runner_sink(f.r);
    bool emitted = true;
    for (int k = 0; k < 70 && emitted; k++) {
        snprintf(names[k], sizeof names[k], "p%d", k);
        struct op phase = {.kind = OP_PHASE, .name = names[k]};
        struct op alloc = {.kind = OP_ALLOC, .category = CAT_ACTIVATION, .id = (uint64_t)k + 1,
                           .bytes = (uint64_t)(k + 1) * 2 * MiB, .name = "layers.3.out"};
        emitted = sink->emit(sink, &phase, &e) == 0 && sink->emit(sink, &alloc, &e) == 0;
    }
    ok(emitted, "70 phases, an allocation in each");
    struct holders_result out;
    ok(holders_finish(f.hs, &out) == 0, "holders finish");
    const struct holders_view *v = &out.at_peak;
    bool each = v->n == HOLDERS_TOP;
    for (size_t i = 0; each && i < HOLDERS_TOP; i++) {
        char want[8];
        snprintf(want, sizeof want, "p%zu", 69 - i);
        each = !strcmp(v->top[i].phase, want) && v->top[i].bytes == (70 - i) * 2 * MiB &&
               !strcmp(v->top[i].tag, "layers.*.out") && v->top[i].count == 1;
    }
    ok(each, "the largest eight: p69's 140 MiB down to p62's 126 MiB, each in its phase (%s first)",
       v->n ? v->top[0].phase : "-");
    fixture_close(&f);
}

int main(void)
{
    fold("decoder.block.3.layer.2.DenseReluDense.wi_0", "decoder.block.*.layer.2.DenseReluDense.wi_0");
    fold("transformer.h.11.mlp", "transformer.h.*.mlp");
    fold("lm_head", "lm_head");
    fold("flex_opt.py:125 init_weight_list", "flex_opt.py:125 init_weight_list");
    fold("h.0x1.7", "h.0x1.*");
    fold("a..12.b.3", "a..*.b.3");
    fold("7", "*");
    fold("", "");
    char cut[6];
    size_t n = holders_fold_tag("abc.12.def", cut, sizeof cut);
    ok(!strcmp(cut, "abc.*") && n == 5, "cut to 5 bytes: 'abc.*', length 5 (%s, %zu)", cut, n);
    n = holders_fold_tag("abc.12.def", cut, 4);
    ok(!strcmp(cut, "abc") && n == 3, "cut to 3 bytes: 'abc', length 3 (%s, %zu)", cut, n);
    n = holders_fold_tag("abc.12.def", cut, 5);
    ok(!strcmp(cut, "abc.") && n == 4, "cut to 4 bytes, before the '*': 'abc.', length 4 (%s, %zu)", cut, n);
    n = holders_fold_tag("lm_head", cut, 3);
    ok(!strcmp(cut, "lm") && n == 2, "nothing folded, cut to 2 bytes: 'lm', length 2 (%s, %zu)", cut, n);

    struct err e = {0};
    if (ok(replay_text(trace, NULL, &e) == 0, "the worked trace replays")) {
        const struct holders_view *v = &res.holders.at_peak;
        ok(v->seen && v->n == 3, "three holders at the peak (%zu)", v->n);
        is_str(v->top[0].tag, "model.layer.*.ffn", "the largest: both layers as one holder");
        is_u64(v->top[0].bytes, 20 * MiB, "  20 MiB");
        is_u64(v->top[0].count, 2, "  in 2 tensors");
        is_str(v->top[0].phase, "forward", "  allocated in forward");
        is_int(v->top[0].category, CAT_ACTIVATION, "  activations");
        is_str(v->top[1].tag, "emb", "then the 5 MiB param");
        is_u64(v->total, 27 * MiB, "27 MiB in all at the peak: 20 + 5 + 2 (the optimizer's 4 MiB comes later)");
        is_int(res.holders.nleaks, 1, "one leak");
        is_str(res.holders.leaks[0].tag, "cache", "  the cache");
        is_u64(res.holders.leaks[0].grown, 6 * MiB, "  grown 2 MiB at each of three boundaries");
        is_int(res.holders.leaks[0].since_step, 1, "  from step 1 on");
        ok(!res.holders.at_oom.seen, "no OOM, no holders at one");
        /* the points of a step: the end of each phase, with the step it began in */
        static const struct {
            const char *phase;
            int64_t step;
            uint64_t allocated;
        } want[] = {{"forward", 1, 7 * MiB}, {"optimizer", 1, 11 * MiB}, {"forward", 2, 13 * MiB}, {"forward", 3, 15 * MiB}};
        bool same = res.run.npoints == 4;
        for (size_t i = 0; same && i < 4; i++)
            same = !strcmp(res.run.points[i].phase, want[i].phase) && res.run.points[i].step == want[i].step &&
                   res.run.points[i].allocated == want[i].allocated;
        ok(same, "points: forward 7, optimizer 11 MiB in step 1, forward 13 and 15 MiB in steps 2 and 3");
        is_u64(res.run.points[1].category[CAT_OPTIMIZER_STATE], 4 * MiB, "  the optimizer state at step 1's end");
    } else {
        diag("%s", e.msg);
    }
    /* on 24 MiB the two 10 MiB layers take 20 MiB of segments and the 5 MiB param needs a 20 MiB one:
     * the holders at the OOM are the layers */
    e = (struct err){0};
    if (ok(replay_text(trace, "24MiB", &e) == 0, "the trace on 24 MiB replays")) {
        const struct holders_view *v = &res.holders.at_oom;
        ok(v->seen && v->n == 1 && !strcmp(v->top[0].tag, "model.layer.*.ffn") && v->top[0].bytes == 20 * MiB,
           "at the OOM: the layers' 20 MiB (%s, %llu)", v->n ? v->top[0].tag : "-",
           v->n ? (unsigned long long)v->top[0].bytes : 0ULL);
    } else {
        diag("%s", e.msg);
    }
    /* five steps: the points kept are steps 1 and 2 (setup, steady) and the last */
    char five[1024] = "";
    for (int k = 1; k <= 5; k++)
        snprintf(five + strlen(five), sizeof five - strlen(five),
                 "step %d samples 1\nphase forward\nalloc x%d 1MiB\nphase backward\nfree x%d\n", k, k, k);
    e = (struct err){0};
    if (ok(replay_text(five, NULL, &e) == 0, "five steps replay")) {
        bool kept = res.run.npoints == 6;
        static const int64_t steps[] = {1, 1, 2, 2, 5, 5};
        for (size_t i = 0; kept && i < 6; i++)
            kept = res.run.points[i].step == steps[i];
        ok(kept, "points of steps 1, 2 and 5 (%zu points)", res.run.npoints);
    }
    /* forty holders of 2 to 80 MiB (more than are captured at once when the peak is passed): the view is
     * still the peak's after the largest go and another comes */
    char many[8192] = "";
    for (int k = 1; k <= 40; k++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "alloc t%d %dMiB 0 activation m%c%c\n", k, 2 * k,
                 'a' + k / 26, 'a' + k % 26);
    for (int k = 36; k <= 40; k++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "free t%d\n", k);
    snprintf(many + strlen(many), sizeof many - strlen(many), "alloc u1 100MiB 0 activation late\nfree u1\n");
    e = (struct err){0};
    if (ok(replay_text(many, NULL, &e) == 0, "forty holders replay")) {
        const struct holders_view *v = &res.holders.at_peak;
        ok(v->n == HOLDERS_TOP && v->total == 1640 * MiB && v->top[0].bytes == 80 * MiB &&
               !strcmp(v->top[0].tag, "mbo") && v->top[7].bytes == 66 * MiB,
           "at the peak: 1640 MiB, the 80 MiB holder first, the 66 MiB one eighth (%llu MiB, %s)",
           (unsigned long long)(v->total / MiB), v->n ? v->top[0].tag : "-");
    } else {
        diag("%s", e.msg);
    }
    test_reused_buffer(false);
    test_reused_buffer(true);
    test_same_tag_in_a_row();
    test_many_pointers(true);
    test_many_pointers(false);
    test_reallocated_live();
    test_restored();
    test_recovered();
    test_many_phases();
    test_changes_after_peak();
    return done_testing();
}
