/* variant_keys.c: the key table of one variant under `variants:`, and of its `expect:`. */
#include <string.h>

#include "scenario/key_macros.h"
#include "scenario/scenario_file.h"

static void variant_defaults(void *obj)
{
    struct variant *v = obj;
    memset(v, 0, sizeof *v);
    job_spec_init(&v->job);
    alloc_config_default(&v->alloc);
}

static int check_expect(const struct key_ctx *c, yaml_node_t *m, void *obj, struct err *e)
{
    struct expectation *x = obj;
    yaml_node_t *key = NULL;
    if (x->oom_phase[0] && !x->oom && yaml_mapping_get(c->doc, m, "oom_phase", &key))
        return yaml_doc_error(c->doc, key, e, "%s.oom_phase is set but %s.oom is false", c->where, c->where);
    if (x->peak_reserved_min && x->peak_reserved_max && x->peak_reserved_min > x->peak_reserved_max &&
        yaml_mapping_get(c->doc, m, "peak_reserved_min", &key))
        return yaml_doc_error(c->doc, key, e, "%s.peak_reserved_min is above %s.peak_reserved_max", c->where,
                              c->where);
    return 0;
}

#define EX struct expectation
static const struct key expect_keys[] = {
    {.name = "oom", .type = KEY_BOOL, FIELD(EX, oom), .required = true,
     .help = "`true`: the run must end in an out-of-memory error; `false`: it must fit."},
    {.name = "peak_reserved_max", .type = KEY_SIZE, FIELD(EX, peak_reserved_max), .zero_means = "no bound",
     .help = "The peak of reserved memory must not exceed this."},
    {.name = "peak_reserved_min", .type = KEY_SIZE, FIELD(EX, peak_reserved_min), .zero_means = "no bound",
     .help = "The peak of reserved memory must reach at least this."},
    K_STR(EX, "oom_phase", oom_phase, false, "any phase",
          "The phase the OOM must happen in, as the op program names it (`load`, `forward`, `backward`, "
          "`optimizer`, `ema`, `eval`, `decode`, ...); needs `oom: true`."),
};
#undef EX

static const struct key_table expect_table = {
    .name = "variants.NAME.expect",
    .help = "What the variant's run must show; `oomlab run` exits 1 when a run misses it.",
    .keys = expect_keys, .nkeys = COUNT(expect_keys), .obj_size = sizeof(struct expectation),
    .check = check_expect,
};

/* `before` runs the faults as written: fixes and kept faults belong to `after` variants. */
static int check_variant(const struct key_ctx *c, yaml_node_t *m, void *obj, struct err *e)
{
    struct variant *v = obj;
    static const char *const after_only[] = {"fixes", "keep_faults"};
    yaml_node_t *key = NULL;
    for (size_t i = 0; i < COUNT(after_only); i++)
        if (!strcmp(v->name, "before") && yaml_mapping_get(c->doc, m, after_only[i], &key))
            return yaml_doc_error(c->doc, key, e,
                                  "%s cannot have %s: 'before' runs the faults as written (put fixes in an "
                                  "'after' variant)",
                                  c->where, after_only[i]);
    return 0;
}

#define V struct variant
static const struct key variant_keys[] = {
    {.name = "fixes", .type = KEY_CUSTOM, FIELD(V, job), .parse = parse_fix_list, .zero_means = "none",
     .doc_type = "list of fix names, each bare or with parameters (`- chunked_decode: {chunk: 2}`)",
     .help = "Fixes this variant adds; allocator fixes add their settings to its `alloc_conf`. See [Fixes](#fixes)."},
    {.name = "keep_faults", .type = KEY_CUSTOM, FIELD(V, job.faults), .parse = parse_keep_faults,
     .doc_type = "list of fault names from `faults`", .zero_means = "all of `faults`",
     .help = "The faults this variant keeps (default: all of them); `[]` drops them all."},
    {.name = "alloc_conf", .type = KEY_CUSTOM, FIELD(V, alloc), .parse = parse_alloc_conf,
     .doc_type = "PYTORCH_CUDA_ALLOC_CONF string", .zero_means = "the scenario's `alloc_conf`",
     .help = "Replaces the scenario's `alloc_conf` for this variant (the fixes' settings are still added)."},
    K_TABLE(V, "job", job, scenario_job_table, false, "Changes to the job for this variant only (same keys as `job`)."),
    K_TABLE(V, "expect", expect, expect_table, true, "What the run must show."),
};
#undef V

const struct key_table scenario_variant_table = {
    .name = "variants.NAME",
    .help = "One variant to run. NAME is `before` (the faults as written, no fixes), `after`, or "
            "`after-SOMETHING`. Each `after` variant is the base job with the faults it keeps and the fixes it "
            "adds. Variants run in file order.",
    .keys = variant_keys, .nkeys = COUNT(variant_keys), .obj_size = sizeof(struct variant),
    .init = variant_defaults, .check = check_variant,
};

