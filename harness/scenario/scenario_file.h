/* scenario_file.h: internal to the scenario loader. What the top-level key table fills, the key
 * tables themselves, and the steps that turn a parsed file into variants. */
#ifndef OOMLAB_SCENARIO_FILE_H
#define OOMLAB_SCENARIO_FILE_H

#include "scenario/keytable.h"
#include "scenario/scenario.h"
#include "workload/hf_config.h"

#define SCENARIO_MAX_VARIANTS 16

/* The `init` of a key table that fills one member of struct job_spec (job.eval, job.robust, ...): that
 * member as job_spec_init leaves it, so the docs and the loader share the job's own defaults. */
#define JOB_MEMBER_DEFAULTS(fn, type, member) \
    static void fn(void *obj)                 \
    {                                         \
        struct job_spec j;                    \
        job_spec_init(&j);                    \
        *(type *)obj = j.member;              \
    }

/* The model mapping: the spec plus how many per-level values the lists held, checked against the
 * number of levels once the mapping is read. */
struct model_input {
    struct model_spec spec;
    char hf_config[512];        /* a Hugging Face config.json, relative to the scenario file */
    struct hf_config_info hf;   /* what it says beyond the model (its torch_dtype) */
    int ntransformer_depth;
    int nattn_heads;
};

/* Everything the top-level mapping says; the variants are built from it once it is all read. */
struct scenario_file {
    struct scenario head;       /* name, title, source, device, alloc_conf; variants built last */
    struct model_input model;
    struct job_spec base;       /* the job with its faults (model copied in from `model`) */
    yaml_node_t *variants_node; /* the `variants:` mapping */
};

extern const struct key_table scenario_top_table;     /* scenario_keys.c */
extern const struct key_table scenario_model_table;   /* model_keys.c */
extern const struct key_table scenario_job_table;     /* job_keys.c */
extern const struct key_table scenario_variant_table; /* variant_keys.c */

/* Custom keys (switch_list.c): faults and fixes with their parameters, and the faults a variant keeps. */
int parse_fault_list(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e);
int parse_fix_list(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e);
int parse_keep_faults(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e);

/* Custom keys (value_checks.c): device names and allocator settings, checked as they are read. */
int parse_device(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e);
int parse_alloc_conf(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e);
int parse_preset(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e);

/* overrides.c: writes each override's value into the document at its key's path (mappings made as needed). */
int scenario_overrides_apply(struct yaml_doc *d, const struct scenario_override *ov, size_t n, struct err *e);

/* adapter_keys.c: quantization and the LoRA keys beyond plain rows. */
extern const struct key_table scenario_quant_table;
int parse_lora_targets(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e);
const char *lora_dtype_at(int i);

/* variants.c: the top-level check that builds every variant from the base job (root is a scenario_file). */
int build_variants(const struct key_ctx *c, yaml_node_t *top, void *obj, struct err *e);

#endif
