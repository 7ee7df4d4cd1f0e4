/* adapter_keys.c: the job keys of quantized fine-tuning: the `quantization:` table (transformers'
 * BitsAndBytesConfig) and the LoRA keys that need more than a plain row (`lora_targets`, a list of
 * module names or `all-linear`; `lora_dtype`, auto or a float dtype). */
#include <string.h>

#include "scenario/key_macros.h"
#include "scenario/scenario_file.h"

static const char *quant_at(int i) { return quant_name((enum quant_kind)i); }

const char *lora_dtype_at(int i)
{
    return i == 0 ? "auto" : float_dtype_at(i - 1);
}

JOB_MEMBER_DEFAULTS(quant_defaults, struct quant_spec, quant)

#define Q struct quant_spec
static const struct key quant_keys[] = {
    K_ENUM(Q, "type", type, quant_at, QUANT_COUNT,
           "bitsandbytes weight format of the decoder layers' linear modules (not lm_head, not embeddings): nf4 "
           "or fp4 (Linear4bit, load_in_4bit), int8 (Linear8bitLt, load_in_8bit: int8 weights and a row absmax; "
           "the outlier columns above llm_int8_threshold, which depend on the data, are taken as none), none. "
           "blocksize, double_quant and compute_dtype apply to the 4-bit types."),
    K_INT(Q, "blocksize", blocksize, 64, 4096, NULL, "Values per fp32 absmax (bnb_4bit blocksize)."),
    K_BOOL(Q, "double_quant", double_quant,
           "bnb_4bit_use_double_quant: the absmax values quantized to 8 bits in blocks of 256, with an fp32 "
           "absmax per 256 blocks and an offset (the QLoRA recipe; transformers' own default is false)."),
    K_ENUM(Q, "compute_dtype", compute_dtype, float_dtype_at, SPEC_FLOAT_DTYPES,
           "bnb_4bit_compute_dtype: the dtype Linear4bit casts its input to and runs its matmul in (transformers' "
           "own default is fp32)."),
    K_BOOL(Q, "prepare_kbit", prepare_kbit,
           "peft's prepare_model_for_kbit_training: every other 16-bit parameter (embeddings, norms, lm_head) "
           "cast to fp32 after loading."),
};
#undef Q

const struct key_table scenario_quant_table = {
    .name = "job.quantization",
    .help = "Quantized base weights (bitsandbytes through transformers' BitsAndBytesConfig). The quantized "
            "weights are frozen: use them with `trainable: lora` (QLoRA).",
    .keys = quant_keys, .nkeys = COUNT(quant_keys), .obj_size = sizeof(struct quant_spec), .init = quant_defaults,
};

int parse_lora_targets(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    (void)k;
    char got[96];
    struct lora_spec *l = field;
    l->ntargets = 0;
    l->all_linear = false;
    if (v->type == YAML_SCALAR_NODE && !strcmp(yaml_scalar_text(v), "all-linear")) {
        l->all_linear = true;
        return 0;
    }
    if (v->type != YAML_SEQUENCE_NODE)
        return yaml_doc_error(c->doc, v, e, "%s must be all-linear or a list of module names, got %s", c->where,
                              yaml_node_describe(v, got, sizeof got));
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_doc_node(c->doc, *it);
        if (l->ntargets == SPEC_LORA_TARGETS)
            return yaml_doc_error(c->doc, item, e, "%s has more than %d names", c->where, SPEC_LORA_TARGETS);
        const char *s = item->type == YAML_SCALAR_NODE ? yaml_scalar_text(item) : "";
        if (!s[0] || strlen(s) >= sizeof l->targets[0])
            return yaml_doc_error(c->doc, item, e, "%s: each entry must be a module name of 1..%zu characters",
                                  c->where, sizeof l->targets[0] - 1);
        memcpy(l->targets[l->ntargets++], s, strlen(s) + 1);
    }
    if (l->ntargets == 0)
        return yaml_doc_error(c->doc, v, e, "%s is empty", c->where);
    return 0;
}
