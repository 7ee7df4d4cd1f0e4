/* scenario_keys.c: the top-level key table of a scenario file. The loader fills structs from the key
 * tables (here and in model_keys.c, job_keys.c, variant_keys.c) and docs/scenario-keys.md is printed
 * from them: a key exists, with its type, range and default, exactly where it is listed. */
#include <string.h>

#include "device/device_kind.h"
#include "scenario/key_macros.h"
#include "scenario/scenario_file.h"

static void top_defaults(void *obj)
{
    struct scenario_file *f = obj;
    memset(f, 0, sizeof *f);
    snprintf(f->head.device, sizeof f->head.device, "%s", DEVICE_DEFAULT);
    alloc_config_default(&f->head.alloc);
    scenario_job_table.init(&f->base);
    scenario_model_table.init(&f->model);
}

static int record_variants(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    if (keytable_expect_mapping(c, v, c->where, e))
        return -1;
    if (v->data.mapping.pairs.start == v->data.mapping.pairs.top)
        return yaml_doc_error(c->doc, v, e, "%s is empty: name at least one variant (before, after, ...)", c->where);
    memcpy(field, &v, sizeof v);
    return 0;
}

static void format_device_default(const struct key *k, const void *field, char *buf, size_t len)
{
    snprintf(buf, len, "`%s`", (const char *)field);
}

#define F struct scenario_file
static const struct key top_keys[] = {
    /* at most what the job's own name holds (it carries the scenario's name) */
    {.name = "name", .type = KEY_STRING, .offset = offsetof(F, head.name), .size = sizeof(((struct job_spec *)0)->name),
     .required = true,
     .help = "Short name of the scenario: lower-case letters, digits, `-`, `_` and `.`; names its results."},
    K_STR(F, "title", head.title, true, NULL, "One line saying what fails."),
    K_STR(F, "source", head.source, true, NULL, "Where the failure was reported (a report, an issue, a section)."),
    {.name = "device", .type = KEY_CUSTOM, FIELD(F, head.device), .parse = parse_device,
     .format = format_device_default,
     .doc_type = "`sim`, `sim:PROFILE`, `sim:SIZE`, `sim:gpuN`, `host`, `host:SIZE`, `host:FRACTION`, `cuda`, "
                 "`cuda:N` or `cuda:auto`",
     .help = "Where the variants run; a simulated GPU profile (see [Devices](#devices)) or capacity, either "
             "optionally with `@cudaX.Y` (that CUDA version's context and framework time), the profile of "
             "this machine's GPU N as NVML names it, host memory (a size, or a share of the machine's as 0.5 "
             "or 50%; default half), or a real GPU (`cuda:auto`: the one with the most free memory)."},
    {.name = "alloc_conf", .type = KEY_CUSTOM, FIELD(F, head.alloc), .parse = parse_alloc_conf,
     .doc_type = "PYTORCH_CUDA_ALLOC_CONF string", .zero_means = "PyTorch's defaults",
     .help = "Allocator settings for every variant, kept verbatim and checked with PyTorch's rules; "
             "`backend:cudaMallocAsync`, which the allocator model does not model, is refused."},
    K_TABLE(F, "model", model, scenario_model_table, true, "The trained model."),
    K_TABLE(F, "job", base, scenario_job_table, false, "The training job."),
    {.name = "faults", .type = KEY_CUSTOM, FIELD(F, base), .parse = parse_fault_list, .zero_means = "none",
     .doc_type = "list of fault names, each bare or with parameters (`- activation_growth: {seq_step: 64}`)",
     .help = "The mistakes switched on; see [Faults](#faults)."},
    {.name = "variants", .type = KEY_CUSTOM, FIELD(F, variants_node), .parse = record_variants,
     .sub = &scenario_variant_table, .required = true,
     .doc_type = "mapping of variant name to [`variants.NAME`](#variantsname)",
     .help = "The runs to compare, each with its expectation."},
};
#undef F

const struct key_table scenario_top_table = {
    .name = "scenario",
    .help = "The top level of a scenario file.",
    .keys = top_keys, .nkeys = COUNT(top_keys), .obj_size = sizeof(struct scenario_file),
    .init = top_defaults, .check = build_variants,
};
