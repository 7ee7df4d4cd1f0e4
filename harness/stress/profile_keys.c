/* profile_keys.c: the key tables of a stress profile (profile.h). The loader fills a struct
 * stress_profile from them and docs/stress-keys.md is printed from them. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_kind.h"
#include "scenario/key_macros.h"
#include "scenario/scenario_file.h"
#include "stress/profile_file.h"
#include "util/size.h"

const char *stress_kind_name(int k)
{
    static const char *const names[STRESS_KIND_COUNT] = {"fill", "churn", "oom_storm", "soak", "streams"};
    return k >= 0 && k < STRESS_KIND_COUNT ? names[k] : NULL;
}

const char *size_dist_name(int d)
{
    static const char *const names[DIST_COUNT] = {"fixed", "uniform", "log_uniform", "mix", "snapshot"};
    return d >= 0 && d < DIST_COUNT ? names[d] : NULL;
}

/* `mix: [1MiB, 20MiB, ...]`: sizes in oomlab's size syntax. */
static int parse_mix(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    struct size_spec *s = (struct size_spec *)((char *)field - offsetof(struct size_spec, mix));
    char got[96];
    if (v->type != YAML_SEQUENCE_NODE || v->data.sequence.items.start == v->data.sequence.items.top)
        return yaml_doc_error(c->doc, v, e, "%s must be a non-empty list of sizes, got %s", c->where,
                              yaml_node_describe(v, got, sizeof got));
    s->nmix = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_doc_node(c->doc, *it);
        if (s->nmix == STRESS_MAX_MIX)
            return yaml_doc_error(c->doc, item, e, "%s has more than %d sizes", c->where, STRESS_MAX_MIX);
        struct err why = {0};
        const char *text = yaml_scalar_text(item);
        if (!text || yaml_is_quoted(item) || size_parse(text, &s->mix[s->nmix], &why))
            return yaml_doc_error(c->doc, item, e, "%s[%d]: %s", c->where, s->nmix,
                                  text ? why.msg : "expected a size such as 64MiB");
        if (s->mix[s->nmix] == 0)
            return yaml_doc_error(c->doc, item, e, "%s[%d] must be at least 1 byte", c->where, s->nmix);
        s->nmix++;
    }
    return 0;
}

/* The key node of `name` in mapping m (for positions), or m itself. */
static yaml_node_t *at_key(const struct key_ctx *c, yaml_node_t *m, const char *name)
{
    yaml_node_t *key = NULL;
    return yaml_mapping_get(c->doc, m, name, &key) ? key : m;
}

static int check_sizes(const struct key_ctx *c, yaml_node_t *m, void *obj, struct err *e)
{
    struct size_spec *s = obj;
    yaml_node_t *dist = at_key(c, m, "distribution");
    switch (s->distribution) {
    case DIST_FIXED:
        if (!s->size)
            return yaml_doc_error(c->doc, dist, e, "%s: distribution fixed needs size (at least 1 byte)", c->where);
        return 0;
    case DIST_UNIFORM:
    case DIST_LOG_UNIFORM:
        if (!s->min || s->max < s->min)
            return yaml_doc_error(c->doc, dist, e, "%s: distribution %s needs min and max with 1 byte <= min <= max",
                                  c->where, size_dist_name(s->distribution));
        return 0;
    case DIST_MIX:
        if (!s->nmix)
            return yaml_doc_error(c->doc, dist, e, "%s: distribution mix needs mix: a list of sizes", c->where);
        return 0;
    case DIST_SNAPSHOT:
        if (!*s->from_snapshot)
            return yaml_doc_error(c->doc, dist, e, "%s: distribution snapshot needs from_snapshot: FILE", c->where);
        return stress_sizes_load_snapshot(c, at_key(c, m, "from_snapshot"), s, e);
    }
    return 0;
}

#define SZ struct size_spec
static const struct key size_keys[] = {
    K_ENUM(SZ, "distribution", distribution, size_dist_name, DIST_COUNT,
           "How sizes are drawn: one size, uniform or log-uniform between min and max, a mix taken in turn, or "
           "the requests of a recorded PyTorch snapshot drawn with their recorded frequencies."),
    {.name = "size", .type = KEY_SIZE, FIELD(SZ, size), .zero_means = "none", .help = "fixed: every request."},
    {.name = "min", .type = KEY_SIZE, FIELD(SZ, min), .zero_means = "none", .help = "uniform, log_uniform: smallest."},
    {.name = "max", .type = KEY_SIZE, FIELD(SZ, max), .zero_means = "none", .help = "uniform, log_uniform: largest."},
    {.name = "mix", .type = KEY_CUSTOM, FIELD(SZ, mix), .parse = parse_mix, .doc_type = "list of sizes",
     .zero_means = "none", .help = "mix: up to 16 sizes, requested in turn."},
    K_STR(SZ, "from_snapshot", from_snapshot, false, "none",
          "snapshot: a PyTorch memory snapshot (`torch.cuda.memory._dump_snapshot`), relative to the profile; "
          "its trace's allocation requests, or without a trace its live blocks, give the histogram."),
};
#undef SZ

static const struct key_table sizes_table = {
    .name = "sizes",
    .help = "The sizes requested (fill, churn, oom_storm, streams), in oomlab's size syntax.",
    .keys = size_keys, .nkeys = COUNT(size_keys), .obj_size = sizeof(struct size_spec), .check = check_sizes,
};

#define FS struct fill_spec
static const struct key fill_keys[] = {
    K_TABLE(FS, "sizes", sizes, sizes_table, true, "What each block requests."),
    {.name = "max_blocks", .type = KEY_UINT, FIELD(FS, max_blocks), .imin = 1, .imax = 1 << 24,
     .help = "Stop after this many blocks even without an OOM."},
};
#undef FS

#define CS struct churn_spec
static const struct key churn_keys[] = {
    K_TABLE(CS, "sizes", sizes, sizes_table, true, "What each allocation requests."),
    {.name = "ops", .type = KEY_UINT, FIELD(CS, ops), .imin = 1, .imax = 100000000,
     .help = "Allocations and frees in all."},
    {.name = "occupancy", .type = KEY_FLOAT, FIELD(CS, occupancy), .fmin = 0, .fmax = 1, .fopen = true,
     .help = "Share of the device's memory the live blocks aim at: below it a step allocates, above it frees a "
             "random live block."},
    K_INT(CS, "points", points, 2, 1000, NULL, "Fragmentation samples over the run (the last is the end)."),
    {.name = "burn_every", .type = KEY_UINT, FIELD(CS, burn_every), .imin = 0, .imax = 100000000, .zero_means = "none",
     .help = "A compute load while churning: an fp32 GEMM (cuBLAS on cuda, the BLAS on host, modelled on sim) every "
             "this many ops, on three buffers of its own allocated first."},
    K_INT(CS, "burn_size", burn_size, 16, 16384, NULL, "The burn GEMM's M = N = K."),
};
#undef CS

#define OS struct oom_storm_spec
static const struct key oom_storm_keys[] = {
    K_TABLE(OS, "sizes", sizes, sizes_table, true, "What each of a step's tensors requests."),
    {.name = "resident", .type = KEY_SIZE, FIELD(OS, resident), .zero_means = "none",
     .help = "Held for the whole run, allocated before the first step, like a model's parameters."},
    K_INT(OS, "rounds", rounds, 1, 100000, NULL,
          "Steps that each allocate until an OOM, then recover: free the step's tensors, empty_cache, retry."),
};
#undef OS

/* The scenario loads and has the variant, so a soak fails here, at its keys, rather than later. */
static int check_soak(const struct key_ctx *c, yaml_node_t *m, void *obj, struct err *e)
{
    const struct soak_spec *s = obj;
    const struct stress_profile *p = c->root;
    char path[1100];
    stress_relative_path(p->path, s->scenario, path, sizeof path);
    struct scenario sc;
    struct err why = {0};
    if (scenario_load(path, &sc, &why))
        return yaml_doc_error(c->doc, at_key(c, m, "scenario"), e, "%s.scenario: %s", c->where, why.msg);
    bool found = false;
    for (size_t i = 0; i < sc.nvariants && !found; i++)
        found = !strcmp(sc.variants[i].name, s->variant);
    scenario_free(&sc);
    if (!found)
        return yaml_doc_error(c->doc, at_key(c, m, "variant"), e, "%s.variant: %s has no variant '%s'", c->where, path,
                              s->variant);
    return 0;
}

#define SS struct soak_spec
static const struct key soak_keys[] = {
    K_STR(SS, "scenario", scenario, true, NULL, "The scenario file to soak, relative to the profile."),
    K_STR(SS, "variant", variant, false, NULL, "Its variant (one that fits)."),
    K_INT(SS, "steps", steps, 1, 1000000, NULL, "Optimizer steps to run (the scenario's job.steps is replaced)."),
    K_INT(SS, "warmup", warmup, 0, 1000, NULL,
          "Steps after which reserved and allocated at each step's end must not move."),
};
#undef SS

#define ST struct streams_spec
static const struct key streams_keys[] = {
    K_TABLE(ST, "sizes", sizes, sizes_table, true, "What each produced tensor requests."),
    {.name = "ops", .type = KEY_UINT, FIELD(ST, ops), .imin = 1, .imax = 100000000,
     .help = "Tensors produced on stream 0, each used by one consumer stream in turn (record_stream)."},
    K_INT(ST, "streams", streams, 2, 8, NULL, "Streams: 0 produces, the others consume."),
    K_INT(ST, "lifetime", lifetime, 1, 1 << 20, NULL, "A tensor is freed this many productions after its own."),
    K_INT(ST, "sync_every", sync_every, 1, 1 << 20, NULL, "A consumer stream synchronises after this many uses."),
};
#undef ST

static void fill_defaults(void *obj)
{
    *(struct fill_spec *)obj = (struct fill_spec){.max_blocks = 1 << 20};
}

static void churn_defaults(void *obj)
{
    *(struct churn_spec *)obj = (struct churn_spec){.ops = 10000, .occupancy = 0.8, .points = 20, .burn_size = 4096};
}

static void oom_storm_defaults(void *obj)
{
    *(struct oom_storm_spec *)obj = (struct oom_storm_spec){.rounds = 10};
}

static void soak_defaults(void *obj)
{
    *(struct soak_spec *)obj = (struct soak_spec){.variant = "before", .steps = 1000, .warmup = 2};
}

static void streams_defaults(void *obj)
{
    *(struct streams_spec *)obj = (struct streams_spec){.ops = 1000, .streams = 2, .lifetime = 4, .sync_every = 8};
}

#define SECTION(var, sect, checks, what)                                                                                 \
    static const struct key_table var = {.name = #sect, .help = what, .keys = sect##_keys,                       \
                                         .nkeys = COUNT(sect##_keys), .obj_size = sizeof(struct sect##_spec),   \
                                         .init = sect##_defaults, .check = checks}
SECTION(fill_table, fill, NULL, "kind: fill: allocate until the first OOM.");
SECTION(churn_table, churn, NULL, "kind: churn: seeded random allocations and frees around a target occupancy.");
SECTION(oom_storm_table, oom_storm, NULL, "kind: oom_storm: OOM after OOM, each recovered from as training code does.");
SECTION(soak_table, soak, check_soak, "kind: soak: a scenario for many steps, checked at every step.");
SECTION(streams_table, streams, NULL, "kind: streams: tensors produced on one stream and used on others.");
#undef SECTION

static void profile_defaults(void *obj)
{
    struct stress_profile *p = obj;
    memset(p, 0, sizeof *p);
    snprintf(p->device, sizeof p->device, "%s", DEVICE_DEFAULT);
    p->seed = 1;
    alloc_config_default(&p->settings[0]);
    p->nsettings = 1;
    fill_defaults(&p->fill);
    churn_defaults(&p->churn);
    oom_storm_defaults(&p->oom_storm);
    soak_defaults(&p->soak);
    streams_defaults(&p->streams);
}

/* `alloc_conf`: one PYTORCH_CUDA_ALLOC_CONF string, or a list of them compared side by side. */
static int parse_settings(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    struct stress_profile *p = c->root;
    (void)field;
    p->settings_given = true;
    if (v->type != YAML_SEQUENCE_NODE) {
        p->nsettings = 1;
        return parse_alloc_conf(c, k, v, &p->settings[0], e);
    }
    p->nsettings = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_doc_node(c->doc, *it);
        if (p->nsettings == STRESS_MAX_SETTINGS)
            return yaml_doc_error(c->doc, item, e, "%s lists more than %d settings", c->where, STRESS_MAX_SETTINGS);
        char where[300];
        snprintf(where, sizeof where, "%s[%d]", c->where, p->nsettings);
        struct key_ctx ic = {c->doc, c->root, where};
        if (parse_alloc_conf(&ic, k, item, &p->settings[p->nsettings], e))
            return -1;
        p->nsettings++;
    }
    if (!p->nsettings)
        return yaml_doc_error(c->doc, v, e, "%s must not be an empty list", c->where);
    return 0;
}

static const char *const section_names[STRESS_KIND_COUNT] = {"fill", "churn", "oom_storm", "soak", "streams"};

/* Only the kind's own section may be given, and it must be. */
static int check_sections(const struct key_ctx *c, yaml_node_t *m, void *obj, struct err *e)
{
    struct stress_profile *p = obj;
    for (int k = 0; k < STRESS_KIND_COUNT; k++) {
        yaml_node_t *key = NULL;
        if (k != p->kind && yaml_mapping_get(c->doc, m, section_names[k], &key))
            return yaml_doc_error(c->doc, key, e, "%s: given, but the profile's kind is %s", section_names[k],
                                  stress_kind_name(p->kind));
    }
    if (!yaml_mapping_get(c->doc, m, section_names[p->kind], NULL))
        return yaml_doc_error(c->doc, at_key(c, m, "kind"), e, "kind %s needs a `%s:` section",
                              stress_kind_name(p->kind), section_names[p->kind]);
    return 0;
}

static void format_device_default(const struct key *k, const void *field, char *buf, size_t len)
{
    (void)k;
    snprintf(buf, len, "`%s`", (const char *)field);
}

#define P struct stress_profile
static const struct key profile_keys[] = {
    {.name = "name", .type = KEY_STRING, FIELD(P, name), .required = true,
     .help = "Short name of the profile; names its results."},
    K_STR(P, "title", title, true, NULL, "One line saying what the profile stresses."),
    {.name = "kind", .type = KEY_ENUM, FIELD(P, kind), .name_of = stress_kind_name, .nnames = STRESS_KIND_COUNT,
     .required = true, .help = "What the profile does; its section (below) holds the parameters."},
    {.name = "device", .type = KEY_CUSTOM, FIELD(P, device), .parse = parse_device, .format = format_device_default,
     .doc_type = "a device spec, as a scenario's `device` (`oomlab stress --device` overrides it)",
     .help = "Where the profile runs."},
    {.name = "alloc_conf", .type = KEY_CUSTOM, FIELD(P, settings), .parse = parse_settings,
     .doc_type = "PYTORCH_CUDA_ALLOC_CONF string, or a list of up to 8", .zero_means = "PyTorch's defaults",
     .help = "Allocator settings; with a list, the profile runs under each and the table compares them."},
    {.name = "seed", .type = KEY_UINT, FIELD(P, seed), .imin = 0, .imax = LLONG_MAX,
     .help = "Seed of the random sizes and choices: the same seed, the same op program."},
    K_TABLE(P, "fill", fill, fill_table, false, "kind fill's parameters."),
    K_TABLE(P, "churn", churn, churn_table, false, "kind churn's parameters."),
    K_TABLE(P, "oom_storm", oom_storm, oom_storm_table, false, "kind oom_storm's parameters."),
    K_TABLE(P, "soak", soak, soak_table, false, "kind soak's parameters."),
    K_TABLE(P, "streams", streams, streams_table, false, "kind streams' parameters."),
};
#undef P

const struct key_table stress_profile_table = {
    .name = "stress profile",
    .help = "The top level of a stress profile (`scenarios/stress/*.yaml`, run by `oomlab stress`).",
    .keys = profile_keys, .nkeys = COUNT(profile_keys), .obj_size = sizeof(struct stress_profile),
    .init = profile_defaults, .check = check_sections,
};
