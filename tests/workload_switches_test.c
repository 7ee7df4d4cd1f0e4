/* workload_switches_test.c: the fault and fix rows. Each switch's parameters have one default (its row's
 * key table writes it, job_spec_init reads it from there) and the row's bounds hold for jobs built in
 * code as for scenario files; the settings hooks change the job as the fixes say; each allocator fix
 * edits a parsed allocator config with worked values, and the config's text stays the string that
 * parses back to it. */
#include "alloc/config.h"
#include "scenario/keytable.h"
#include "tap.h"
#include "util/size.h"
#include "workload/spec.h"

/* Every setting of two configs, and their text, agree. */
static bool same_config(const struct alloc_config *a, const struct alloc_config *b)
{
    return a->max_split_size == b->max_split_size && a->max_non_split_rounding == b->max_non_split_rounding &&
           !memcmp(a->roundup_power2_divisions, b->roundup_power2_divisions, sizeof a->roundup_power2_divisions) &&
           a->garbage_collection_threshold == b->garbage_collection_threshold &&
           a->per_process_memory_fraction == b->per_process_memory_fraction &&
           a->expandable_segments == b->expandable_segments &&
           a->release_lock_on_cudamalloc == b->release_lock_on_cudamalloc &&
           a->pinned_use_cuda_host_register == b->pinned_use_cuda_host_register &&
           a->pinned_num_register_threads == b->pinned_num_register_threads &&
           a->pinned_use_background_threads == b->pinned_use_background_threads &&
           a->graph_capture_record_stream_reuse == b->graph_capture_record_stream_reuse && !strcmp(a->text, b->text);
}

/* The bytes a row's key table writes as defaults, against the job's slot after job_spec_init. */
static void defaults_from_rows(const char *what, const struct switch_info *rows, int n,
                               const struct switch_params *slots)
{
    for (int i = 0; i < n; i++) {
        is_int(rows[i].id, i, "%s %s: row %d holds id %d", what, rows[i].name, i, rows[i].id);
        if (!rows[i].params)
            continue;
        struct switch_params want = {{0}};
        if (rows[i].params->init)
            rows[i].params->init(want.bytes);
        ok(!memcmp(&want, &slots[rows[i].id], sizeof want), "%s %s: job_spec_init gives its row's defaults", what,
           rows[i].name);
        struct err e = {0};
        ok(keytable_check_values(rows[i].params, want.bytes, rows[i].params->name, &e) == 0,
           "%s %s: its defaults are within its bounds %s", what, rows[i].name, e.msg);
        for (size_t k = 0; k < rows[i].params->nkeys; k++)
            ok(rows[i].params->keys[k].help && *rows[i].params->keys[k].help, "%s %s.%s has help", what,
               rows[i].name, rows[i].params->keys[k].name);
    }
}

static void test_defaults(void)
{
    struct job_spec s;
    int nf, nx;
    const struct switch_info *faults = fault_table(&nf), *fixes = fix_table(&nx);
    job_spec_init(&s);
    defaults_from_rows("fault", faults, nf, s.fault_params);
    defaults_from_rows("fix", fixes, nx, s.fix_params);
    is_int(nf, FAULT_COUNT, "every fault has a row");
    is_int(nx, FIX_COUNT, "every fix has a row");
    /* the documented defaults, read through the accessors */
    is_int(gradient_checkpointing_params(&s).every, 1, "gradient_checkpointing.every defaults to 1");
    is_int(chunked_decode_params(&s).chunk, 1, "chunked_decode.chunk defaults to 1");
    is_int(max_split_size_mb_params(&s).mb, 128, "max_split_size_mb.mb defaults to 128");
    ok(garbage_collection_threshold_params(&s).threshold == 0.7, "garbage_collection_threshold defaults to 0.7");
    is_int(mixed_precision_params(&s).dtype, DT_BF16, "mixed_precision.dtype defaults to bf16");
    is_int(gradient_accumulation_params(&s).micro_batch, 0, "gradient_accumulation.micro_batch defaults to 0");
    is_u64(variable_length_fragmentation_params(&s).seed, 1, "variable_length_fragmentation.seed defaults to 1");
    is_int(activation_growth_params(&s).max_length, 0, "activation_growth.max_length defaults to 0");
}

/* A job built in code is held to the rows' bounds, for the switches that are on. */
static void test_bounds(void)
{
    struct job_spec s;
    struct err e = {0};
    job_spec_init(&s);
    gradient_checkpointing_params_set(&s, &(struct gradient_checkpointing_params){.every = 0});
    ok(job_spec_validate(&s, &e) == 0, "a switch that is off is not checked");
    s.fixes = 1u << FIX_GRADIENT_CHECKPOINTING;
    ok(job_spec_validate(&s, &e) < 0 && e.code == ERR_INPUT, "every: 0 with gradient_checkpointing on is refused");
    is_str(e.msg, "variants.NAME.fixes.gradient_checkpointing.every must be from 1 to 4096, got 0",
           "  with the row's bounds");
    job_spec_init(&s);
    e = (struct err){0};
    s.fixes = 1u << FIX_GARBAGE_COLLECTION_THRESHOLD;
    garbage_collection_threshold_params_set(&s, &(struct garbage_collection_threshold_params){.threshold = 1.0});
    ok(job_spec_validate(&s, &e) < 0, "threshold 1 is refused: the interval is open");
    is_str(e.msg,
           "variants.NAME.fixes.garbage_collection_threshold.threshold must be between 0 and 1 (not 0 or 1 itself), "
           "got 1",
           "  message");
    job_spec_init(&s);
    e = (struct err){0};
    s.faults = 1u << FAULT_VARIABLE_LENGTH_FRAGMENTATION;
    variable_length_fragmentation_params_set(&s, &(struct variable_length_fragmentation_params){.seed = 7, .min = -1});
    ok(job_spec_validate(&s, &e) < 0, "a negative shortest length is refused");
    is_str(e.msg, "faults.variable_length_fragmentation.min must be from 0 to 4194304, got -1", "  message");
}

static void test_settings(void)
{
    struct job_spec s;
    job_spec_init(&s);
    s.batch = 8;
    s.fixes = 1u << FIX_MIXED_PRECISION | 1u << FIX_GRADIENT_ACCUMULATION;
    mixed_precision_params_set(&s, &(struct mixed_precision_params){.dtype = DT_F16});
    gradient_accumulation_params_set(&s, &(struct gradient_accumulation_params){.micro_batch = 3});
    switches_apply_settings(&s);
    ok(s.autocast && s.autocast_dtype == DT_F16 && s.loss_scaling,
       "mixed_precision fp16: autocast in fp16, loss scaled");
    is_int(s.batch, 3, "gradient_accumulation micro_batch 3 of 8: micro-batches of 3");
    is_int(s.grad_accum, 3, "  ceil(8 / 3) = 3 of them per step");

    job_spec_init(&s);
    s.batch = 8;
    s.grad_accum = 2;
    s.fixes = 1u << FIX_GRADIENT_ACCUMULATION;
    switches_apply_settings(&s);
    ok(s.batch == 2 && s.grad_accum == 8, "micro_batch 0: batch / 4 = 2, times the job's own 2 accumulations");

    job_spec_init(&s);
    s.autocast = true;
    s.autocast_dtype = DT_BF16;
    s.fixes = 1u << FIX_MIXED_PRECISION;
    mixed_precision_params_set(&s, &(struct mixed_precision_params){.dtype = DT_F16});
    switches_apply_settings(&s);
    ok(s.autocast_dtype == DT_BF16 && !s.loss_scaling, "mixed_precision leaves a job already under autocast alone");

    job_spec_init(&s);
    s.nextras = 1;
    snprintf(s.extras[0].preset, sizeof s.extras[0].preset, "clip-l-text");
    s.extras[0].role = EXTRA_TEXT_ENCODER;
    s.extras[0].on_device = false;
    s.faults = 1u << FAULT_UNRELEASED_GRADIENTS | 1u << FAULT_RESIDENT_TEXT_ENCODER;
    switches_apply_settings(&s);
    ok(!s.set_to_none && s.extras[0].on_device, "faults: gradients kept, the text encoder resident");
    s.fixes = 1u << FIX_ZERO_GRAD_SET_TO_NONE | 1u << FIX_OFFLOAD_TEXT_ENCODER;
    switches_apply_settings(&s);
    ok(s.set_to_none && !s.extras[0].on_device, "their fixes win over them (faults' hooks run first)");
}

/* One allocator fix on PyTorch's defaults: the fields it sets and the text it adds. */
static void edit_one(enum fix_id fix, void (*set)(struct job_spec *), const char *text, const char *name)
{
    struct job_spec s;
    struct alloc_config c, parsed;
    struct err e = {0};
    job_spec_init(&s);
    s.fixes = 1u << fix;
    if (set)
        set(&s);
    alloc_config_default(&c);
    ok(switches_edit_alloc(&s, &c, &e) == 0, "%s edits the config %s", name, e.msg);
    is_str(c.text, text, "%s: its text", name);
    alloc_config_default(&parsed);
    ok(alloc_config_parse(&parsed, c.text, &e) == 0 && same_config(&parsed, &c),
       "%s: the text parses back to the same config", name);
}

static void split_512(struct job_spec *s)
{
    max_split_size_mb_params_set(s, &(struct max_split_size_mb_params){.mb = 512});
}

static void threshold_06(struct job_spec *s)
{
    garbage_collection_threshold_params_set(s, &(struct garbage_collection_threshold_params){.threshold = 0.6});
}

static void test_alloc_edits(void)
{
    struct job_spec s;
    struct alloc_config c, before;
    struct err e = {0};

    job_spec_init(&s);
    alloc_config_default(&c);
    s.fixes = 1u << FIX_EXPANDABLE_SEGMENTS;
    ok(switches_edit_alloc(&s, &c, &e) == 0 && c.expandable_segments, "expandable_segments: expandable_segments true");
    job_spec_init(&s);
    alloc_config_default(&c);
    s.fixes = 1u << FIX_MAX_SPLIT_SIZE_MB;
    switches_edit_alloc(&s, &c, &e);
    is_u64(c.max_split_size, 134217728, "max_split_size_mb (default mb 128): max_split_size 134,217,728 B");
    split_512(&s);
    alloc_config_default(&c);
    switches_edit_alloc(&s, &c, &e);
    is_u64(c.max_split_size, 536870912, "max_split_size_mb mb 512: 536,870,912 B");
    job_spec_init(&s);
    alloc_config_default(&c);
    s.fixes = 1u << FIX_GARBAGE_COLLECTION_THRESHOLD;
    switches_edit_alloc(&s, &c, &e);
    ok(c.garbage_collection_threshold == 0.7, "garbage_collection_threshold (default 0.7): threshold 0.7");

    edit_one(FIX_EXPANDABLE_SEGMENTS, NULL, "expandable_segments:True", "expandable_segments");
    edit_one(FIX_MAX_SPLIT_SIZE_MB, split_512, "max_split_size_mb:512", "max_split_size_mb 512");
    edit_one(FIX_GARBAGE_COLLECTION_THRESHOLD, threshold_06, "garbage_collection_threshold:0.6",
             "garbage_collection_threshold 0.6");

    /* on a scenario's own settings, in table order; what the scenario set and the fixes did not stays */
    job_spec_init(&s);
    s.fixes = 1u << FIX_GARBAGE_COLLECTION_THRESHOLD | 1u << FIX_MAX_SPLIT_SIZE_MB | 1u << FIX_EXPANDABLE_SEGMENTS |
              1u << FIX_CONVERT_ONCE;
    alloc_config_default(&c);
    alloc_config_parse(&c, "max_split_size_mb:256,roundup_power2_divisions:4,per_process_memory_fraction:0.5", &e);
    before = c;
    ok(switches_edit_alloc(&s, &c, &e) == 0, "three allocator fixes and a generator fix");
    is_str(c.text,
           "max_split_size_mb:256,roundup_power2_divisions:4,per_process_memory_fraction:0.5,expandable_segments:True,"
           "max_split_size_mb:128,garbage_collection_threshold:0.7",
           "their settings follow the scenario's, in table order");
    is_u64(c.max_split_size, 128 * MiB, "the fix's max_split_size_mb replaces the scenario's 256");
    ok(c.roundup_power2_divisions[3] == before.roundup_power2_divisions[3] && c.per_process_memory_fraction == 0.5,
       "the scenario's divisions and memory fraction stay");
    struct alloc_config parsed;
    alloc_config_default(&parsed);
    ok(alloc_config_parse(&parsed, c.text, &e) == 0 && same_config(&parsed, &c),
       "the whole text parses back to the same config");

    /* a generator-only fix touches nothing */
    job_spec_init(&s);
    s.fixes = 1u << FIX_GRADIENT_CHECKPOINTING;
    alloc_config_default(&c);
    before = c;
    ok(switches_edit_alloc(&s, &c, &e) == 0 && same_config(&c, &before),
       "generator fixes leave the config alone");

    /* the setters keep PyTorch's rules, and leave the config as it was when they refuse */
    alloc_config_default(&c);
    before = c;
    ok(alloc_config_set_max_split_size_mb(&c, 19, &e) < 0 && same_config(&c, &before),
       "max_split_size_mb 19 is refused, config unchanged");
    is_str(e.msg, "max_split_size_mb:19: CachingAllocator option max_split_size_mb too small, must be >= 20",
           "  with PyTorch's wording");
    e = (struct err){0};
    ok(alloc_config_set_garbage_collection_threshold(&c, 1.0, &e) < 0 && same_config(&c, &before),
       "threshold 1.0 is refused");
    is_str(e.msg, "garbage_collection_threshold:1: garbage_collect_threshold is invalid, set it in (0.0, 1.0)",
           "  with PyTorch's wording");
    char longest[sizeof c.text];
    memset(longest, 'x', sizeof longest);
    longest[sizeof longest - 1] = 0;
    memcpy(c.text, longest, sizeof longest);
    before = c;
    ok(alloc_config_set_expandable_segments(&c, true, &e) < 0 && same_config(&c, &before),
       "a setting that does not fit the text is refused, config unchanged");
    alloc_config_default(&c);
    alloc_config_parse(&c, "expandable_segments:False,", &e);
    alloc_config_set_max_split_size_mb(&c, 20, &e);
    is_str(c.text, "expandable_segments:False,max_split_size_mb:20", "a trailing comma is not doubled");

    char setting[64];
    switch_alloc_setting(&fix_table(&(int){0})[FIX_MAX_SPLIT_SIZE_MB], setting, sizeof setting);
    is_str(setting, "max_split_size_mb:128", "the documented setting of max_split_size_mb");
    switch_alloc_setting(&fix_table(&(int){0})[FIX_CONVERT_ONCE], setting, sizeof setting);
    is_str(setting, "", "a generator fix has none");
}

int main(void)
{
    test_defaults();
    test_bounds();
    test_settings();
    test_alloc_edits();
    return done_testing();
}
