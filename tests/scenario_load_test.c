/* scenario_load_test.c: good scenario files load with the values written and the documented defaults;
 * directories load every *.yaml in name order; missing files and empty directories are errors. */
#include "scenario/scenario.h"
#include "tap.h"
#include "util/size.h"

#define GOOD "tests/data/scenarios/good/"

static int load(const char *path, struct scenario *s)
{
    struct err e = {0};
    int rc = scenario_load(path, s, &e);
    if (rc)
        diag("%s", e.msg);
    return rc;
}

static void test_example(void)
{
    struct scenario s;
    if (!ok(load(GOOD "flan-t5-xl.yaml", &s) == 0, "the schema example loads"))
        return;
    is_str(s.path, GOOD "flan-t5-xl.yaml", "path kept");
    is_str(s.name, "flan-t5-xl-duplicate-conversion", "name");
    is_str(s.title, "FLAN-T5-XL fine-tuning OOMs from a duplicate fp32->bf16 conversion", "title");
    is_str(s.source, "RTX 5090 report, see failure-modes.md #1", "source");
    is_str(s.device, "sim:rtx5090", "device");
    is_str(s.alloc.text, "", "alloc_conf");
    is_int(s.nvariants, 2, "two variants");
    const struct variant *b = &s.variants[0], *a = &s.variants[1];
    is_str(b->name, "before", "first variant in file order");
    is_str(b->job.model.preset, "flan-t5-xl", "preset");
    is_int(b->job.batch, 8, "batch_size");
    is_int(b->job.seq_len, 512, "seq_len");
    is_int(b->job.param_dtype, DT_BF16, "param_dtype");
    is_int(b->job.optimizer, OPT_ADAMW_8BIT, "optimizer");
    is_int(b->job.steps, 2, "steps");
    is_int(b->job.grad_accum, 16, "grad_accum");
    is_str(b->job.name, "flan-t5-xl-duplicate-conversion", "the job carries the scenario name");
    ok(spec_has_fault(&b->job, FAULT_DUPLICATE_DTYPE_CONVERSION), "before has the fault");
    is_int(b->job.fixes, 0, "before has no fixes");
    ok(b->expect.oom, "before expects an OOM");
    is_str(b->expect.oom_phase, "load", "in the load phase");
    is_u64(b->expect.peak_reserved_max, 0, "no bound on before's peak");
    is_str(a->name, "after", "second variant");
    ok(spec_has_fault(&a->job, FAULT_DUPLICATE_DTYPE_CONVERSION), "after keeps the fault by default");
    ok(spec_has_fix(&a->job, FIX_CONVERT_ONCE) && spec_has_fix(&a->job, FIX_GRADIENT_CHECKPOINTING), "after's fixes");
    ok(!a->expect.oom, "after expects to fit");
    is_u64(a->expect.peak_reserved_max, 31 * GiB, "peak_reserved_max 31GiB");
    is_str(a->alloc.text, "", "generator fixes add no allocator settings");
    scenario_free(&s);
}

static void test_defaults(void)
{
    struct scenario s;
    struct job_spec d;
    job_spec_init(&d);
    if (!ok(load(GOOD "minimal.yaml", &s) == 0, "a scenario with only the required keys loads"))
        return;
    is_str(s.device, "sim:rtx5090", "device defaults to the simulated RTX 5090");
    is_str(s.alloc.text, "", "alloc_conf defaults to PyTorch's defaults");
    is_int(s.nvariants, 1, "one variant");
    const struct variant *v = &s.variants[0];
    is_str(v->job.model.preset, "tiny-transformer", "the preset");
    is_int(v->job.batch, d.batch, "batch_size default");
    is_int(v->job.seq_len, d.seq_len, "seq_len default");
    is_int(v->job.steps, d.steps, "steps default");
    is_int(v->job.grad_accum, d.grad_accum, "grad_accum default");
    is_int(v->job.optimizer, d.optimizer, "optimizer default");
    is_int(v->job.param_dtype, d.param_dtype, "param_dtype default");
    is_int(v->job.ema, d.ema, "ema default");
    is_int(v->job.eval.every, d.eval.every, "eval.every default");
    is_u64(v->job.cublas_workspace_bytes, 0, "cublas_workspace defaults to 0: the device's own");
    is_int(v->job.streams, d.streams, "streams default");
    is_int(v->job.faults, 0, "no faults");
    is_int(v->job.fixes, 0, "no fixes");
    ok(!v->expect.oom, "expects to fit");
    is_u64(v->expect.peak_reserved_max + v->expect.peak_reserved_min, 0, "no bounds");
    is_str(v->expect.oom_phase, "", "any phase");
    scenario_free(&s);
}

static void test_family_and_variants(void)
{
    struct scenario s;
    if (!ok(load(GOOD "family-decoder.yaml", &s) == 0, "a family model with every variant key loads"))
        return;
    is_str(s.device, "sim:24GiB", "device with a capacity");
    is_str(s.alloc.text, "max_split_size_mb:256", "alloc_conf verbatim");
    is_int(s.nvariants, 4, "four variants");
    const struct variant *b = &s.variants[0];
    const struct model_spec *m = &b->job.model;
    is_str(m->preset, "", "no preset");
    is_int(m->family, FAMILY_DECODER, "family");
    is_int(m->layers, 12, "layers");
    is_int(m->hidden, 768, "hidden");
    is_int(m->heads, 12, "heads");
    is_int(m->ffn, 3072, "ffn");
    is_int(m->vocab, 50257, "vocab");
    is_int(m->max_positions, 1024, "max_positions");
    is_int(m->norm, NORM_LAYERNORM, "norm");
    is_int(m->act, ACT_GELU_TANH, "act");
    is_int(m->pos, POS_LEARNED, "pos");
    ok(m->causal && m->lm_head && m->tied_embeddings, "bools");
    is_int(m->attn, ATTN_EAGER, "attn");
    ok(m->dropout == 0.0f, "dropout");
    const struct job_spec *j = &b->job;
    is_int(j->batch, 16, "batch_size");
    is_int(j->load_dtype, DT_F32, "load_dtype");
    ok(j->autocast, "autocast");
    is_int(j->autocast_dtype, DT_BF16, "autocast_dtype");
    ok(!j->foreach, "foreach false");
    is_int(j->ema, EMA_GPU, "ema");
    is_int(j->eval.every, 3, "eval.every");
    ok(j->eval.before_training, "eval.before_training");
    is_int(j->eval.batch, 4, "eval.batch_size");
    is_int(j->eval.batches, 2, "eval.batches");
    is_int(j->nextras, 1, "one extra");
    is_str(j->extras[0].preset, "clip-l-text", "extra preset");
    is_int(j->extras[0].role, EXTRA_TEXT_ENCODER, "extra role");
    is_int(j->extras[0].dtype, DT_F16, "extra dtype");
    ok(!j->extras[0].on_device, "extra on the CPU");
    is_u64(j->cublas_workspace_bytes, 32 * MiB, "cublas_workspace");
    is_int(j->streams, 2, "streams");
    ok(spec_has_fault(j, FAULT_ACTIVATION_GROWTH) && spec_has_fault(j, FAULT_EMA_CONTEXT_SPIKE), "two faults");
    is_int(activation_growth_params(j).seq_step, 64, "fault parameter");
    is_u64(b->expect.peak_reserved_min, 20 * GiB, "peak_reserved_min");
    is_str(b->expect.oom_phase, "forward", "oom_phase");
    is_str(b->alloc.text, "max_split_size_mb:256", "before runs the scenario's allocator settings");

    const struct variant *x = &s.variants[1];
    is_str(x->name, "after-expandable", "after-NAME variant");
    ok(spec_has_fix(&x->job, FIX_EXPANDABLE_SEGMENTS) && spec_has_fix(&x->job, FIX_MAX_SPLIT_SIZE_MB),
       "allocator fixes are switched on");
    is_int(max_split_size_mb_params(&x->job).mb, 512, "fix parameter");
    is_str(x->alloc.text, "max_split_size_mb:256,expandable_segments:True,max_split_size_mb:512",
           "allocator fixes add to the scenario's alloc_conf");
    ok(spec_has_fault(&x->job, FAULT_ACTIVATION_GROWTH) && spec_has_fault(&x->job, FAULT_EMA_CONTEXT_SPIKE),
       "all faults kept by default");

    const struct variant *h = &s.variants[2];
    is_str(h->name, "after-half-batch", "third variant");
    ok(spec_has_fault(&h->job, FAULT_ACTIVATION_GROWTH) && !spec_has_fault(&h->job, FAULT_EMA_CONTEXT_SPIKE),
       "keep_faults keeps only the faults listed");
    is_int(activation_growth_params(&h->job).seq_step, 64, "kept fault keeps its parameter");
    is_str(h->alloc.text, "", "a variant's alloc_conf replaces the scenario's");
    is_int(h->job.batch, 8, "job change: batch_size");
    is_int(h->job.grad_accum, 4, "job change: grad_accum");
    is_int(h->job.seq_len, 1024, "unchanged job keys come from the base job");
    ok(spec_has_fix(&h->job, FIX_MIXED_PRECISION), "fix with a dtype parameter");
    is_int(mixed_precision_params(&h->job).dtype, DT_F16, "dtype parameter");
    is_u64(h->expect.peak_reserved_max, (uint64_t)(22.5 * GiB), "fractional size");
    is_u64(h->expect.peak_reserved_min, 1000000000, "decimal size");

    const struct variant *a = &s.variants[3];
    is_int(a->job.faults, 0, "keep_faults: [] drops every fault");
    is_int(a->job.fixes, 0, "no fixes");
    is_int(s.variants[0].job.fixes, 0, "variants do not leak fixes into each other");
    scenario_free(&s);
}

/* Keys beside a preset override its choices, wherever they are written; the rest is the preset's. */
static void test_preset_overrides(void)
{
    struct scenario s;
    if (!ok(load(GOOD "preset-overrides.yaml", &s) == 0, "a preset with overrides loads"))
        return;
    const struct model_spec *m = &s.variants[0].job.model;
    struct model_spec preset;
    struct err e = {0};
    preset_apply(&preset, "gpt2-large", &e);
    is_str(m->preset, "gpt2-large", "the preset names the model");
    is_int(m->attn, ATTN_EAGER, "attn: eager overrides the preset's SDPA (written before the preset)");
    is_int(m->layers, 12, "layers: 12 overrides the preset's 36");
    ok(m->dropout == 0.0f && preset.dropout == 0.1f, "dropout: 0 overrides the preset's 0.1");
    is_int(m->hidden, preset.hidden, "hidden is the preset's");
    is_int(m->heads, preset.heads, "heads is the preset's");
    is_int(m->vocab, preset.vocab, "vocab is the preset's");
    ok(m->tied_embeddings && m->causal, "the preset's choices stay where not overridden");
    scenario_free(&s);
}

static void test_allocator_fixes(void)
{
    struct scenario s;
    if (!ok(load(GOOD "allocator-fixes.yaml", &s) == 0, "a scenario with only an allocator variant loads"))
        return;
    const struct variant *v = &s.variants[0];
    struct model_spec preset;
    struct err e = {0};
    preset_apply(&preset, "flan-t5-xl", &e);
    is_str(v->job.model.preset, "flan-t5-xl", "the preset is kept");
    is_int(v->job.model.layers, preset.layers, "the validated job has the preset's dimensions");
    is_int(v->job.model.hidden, preset.hidden, "  hidden");
    is_str(s.device, "host:8GiB", "host device with a capacity");
    is_int(s.nvariants, 1, "a scenario may have only after variants");
    is_str(v->name, "after-allocator", "its name");
    is_int(v->job.target_len, 64, "target_len");
    ok(garbage_collection_threshold_params(&v->job).threshold == 0.6, "a number parameter");
    is_str(v->alloc.text, "expandable_segments:True,garbage_collection_threshold:0.6",
           "allocator fixes make the whole alloc_conf when the scenario has none");
    scenario_free(&s);
}

static void test_directory(void)
{
    struct scenario *all;
    size_t n;
    struct err e = {0};
    int rc = scenario_load_dir_or_file("tests/data/scenarios/good", &all, &n, &e);
    if (!ok(rc == 0, "a directory loads"))
        diag("%s", e.msg);
    if (rc)
        return;
    is_int(n, 5, "every *.yaml in it");
    is_str(all[0].name, "flan-t5-xl-allocator", "in file-name order (allocator-fixes.yaml)");
    is_str(all[1].name, "gpt2-small-growth", "family-decoder.yaml");
    is_str(all[2].name, "flan-t5-xl-duplicate-conversion", "flan-t5-xl.yaml");
    is_str(all[3].name, "minimal", "minimal.yaml");
    is_str(all[4].name, "preset-overrides", "preset-overrides.yaml");
    scenario_free_all(all, n);

    rc = scenario_load_dir_or_file("tests/data/scenarios/good/", &all, &n, &e);
    is_int(rc, 0, "a trailing slash is fine");
    if (rc == 0)
        is_str(all[0].path, "tests/data/scenarios/good/allocator-fixes.yaml", "paths are joined without '//'");
    if (rc == 0)
        scenario_free_all(all, n);

    rc = scenario_load_dir_or_file(GOOD "minimal.yaml", &all, &n, &e);
    is_int(rc, 0, "a single file loads as a list of one");
    is_int(n, 1, "one scenario");
    if (rc == 0)
        scenario_free_all(all, n);

    memset(&e, 0, sizeof e);
    rc = scenario_load_dir_or_file("tests/data/scenarios", &all, &n, &e);
    is_int(rc, -1, "a directory without *.yaml files is an error");
    is_str(e.msg, "tests/data/scenarios: no *.yaml scenario files in this directory", "  message");
    ok(all == NULL && n == 0, "  and returns nothing");

    memset(&e, 0, sizeof e);
    rc = scenario_load_dir_or_file("tests/data/scenarios/bad", &all, &n, &e);
    is_int(rc, -1, "a directory with a bad file fails");
    ok(strncmp(e.msg, "tests/data/scenarios/bad/", 25) == 0, "  naming the file: %s", e.msg);

    memset(&e, 0, sizeof e);
    struct scenario s;
    rc = scenario_load("tests/data/scenarios/no-such-file.yaml", &s, &e);
    is_int(rc, -1, "a missing file is an error");
    is_int(e.code, ERR_INPUT, "  of bad input");
    is_str(e.msg, "tests/data/scenarios/no-such-file.yaml: cannot open: No such file or directory", "  message");
}

int main(void)
{
    test_example();
    test_defaults();
    test_family_and_variants();
    test_preset_overrides();
    test_allocator_fixes();
    test_directory();
    return done_testing();
}
