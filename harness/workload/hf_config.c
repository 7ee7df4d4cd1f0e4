/* hf_config.c: a decoder model_spec from a Hugging Face config.json, for the Llama-style model types
 * (llama, mistral, qwen2). The architecture is transformers' LlamaForCausalLM / MistralForCausalLM /
 * Qwen2ForCausalLM (RMSNorm, gated SiLU MLP, rotary positions, no biases except Qwen2's q/k/v); the
 * dimensions are read from the file. Defaults of optional fields are those of LlamaConfig,
 * MistralConfig and Qwen2Config (transformers/models/{llama,mistral,qwen2}/configuration_*.py):
 * num_key_value_heads = num_attention_heads, head_dim = hidden_size / num_attention_heads,
 * tie_word_embeddings false, hidden_act "silu", attention_bias false. */
#include "workload/hf_config.h"

#include <jansson.h>
#include <string.h>

enum hf_type { HF_LLAMA, HF_MISTRAL, HF_QWEN2, HF_TYPE_COUNT };
static const char *const type_names[HF_TYPE_COUNT] = {"llama", "mistral", "qwen2"};

/* A whole number field: *out unchanged when absent and not required. */
static int int_field(json_t *root, const char *path, const char *key, bool required, int *out, struct err *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return required ? err_set(e, ERR_INPUT, "%s: missing required field '%s'", path, key) : 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 30))
        return err_set(e, ERR_INPUT, "%s: field '%s' must be a whole number from 1", path, key);
    *out = (int)json_integer_value(v);
    return 0;
}

static int bool_field(json_t *root, const char *path, const char *key, bool *out, struct err *e)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return err_set(e, ERR_INPUT, "%s: field '%s' must be true or false", path, key);
    *out = json_is_true(v);
    return 0;
}

static int str_field(json_t *root, const char *path, const char *key, const char **out, struct err *e)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return err_set(e, ERR_INPUT, "%s: field '%s' must be a string", path, key);
    *out = json_string_value(v);
    return 0;
}

static int fill(json_t *root, const char *path, struct model_spec *m, FILE *warn, struct err *e)
{
    const char *type = NULL, *act = "silu";
    if (str_field(root, path, "model_type", &type, e))
        return -1;
    if (!type)
        return err_set(e, ERR_INPUT, "%s: missing required field 'model_type'", path);
    if (hf_config_vision_type(type))
        return hf_config_vision_fill(root, path, type, m, warn, e);
    enum hf_type t = 0;
    while (t < HF_TYPE_COUNT && strcmp(type, type_names[t]))
        t++;
    if (t == HF_TYPE_COUNT)
        return err_set(e, ERR_INPUT, "%s: model_type '%s' is not supported (llama, mistral, qwen2, vit, clip, clip_vision_model)", path, type);
    /* The Llama architecture (norms, gated SiLU MLP, rotary, causal LM head) from its preset. */
    if (preset_apply(m, "llama-3-8b", e))
        return -1;
    m->preset[0] = m->expanded_from[0] = 0;
    m->kv_heads = m->head_dim = 0;
    m->max_positions = 0; /* rotary: no learned table, so an absent count is not an error */
    m->tied_embeddings = false;
    bool attention_bias = false;
    if (int_field(root, path, "hidden_size", true, &m->hidden, e) ||
        int_field(root, path, "num_hidden_layers", true, &m->layers, e) ||
        int_field(root, path, "num_attention_heads", true, &m->heads, e) ||
        int_field(root, path, "intermediate_size", true, &m->ffn, e) ||
        int_field(root, path, "vocab_size", true, &m->vocab, e) ||
        int_field(root, path, "num_key_value_heads", false, &m->kv_heads, e) ||
        int_field(root, path, "head_dim", false, &m->head_dim, e) ||
        int_field(root, path, "max_position_embeddings", false, &m->max_positions, e) ||
        bool_field(root, path, "tie_word_embeddings", &m->tied_embeddings, e) ||
        bool_field(root, path, "attention_bias", &attention_bias, e) || str_field(root, path, "hidden_act", &act, e))
        return -1;
    if (strcmp(act, "silu"))
        return err_set(e, ERR_INPUT, "%s: hidden_act '%s' is not modelled for %s (only silu)", path, act, type);
    if (m->kv_heads && m->heads % m->kv_heads)
        return err_set(e, ERR_INPUT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                       m->heads, m->kv_heads);
    bool mlp_bias = false;
    if (bool_field(root, path, "mlp_bias", &mlp_bias, e))
        return -1;
    if (mlp_bias)
        return err_set(e, ERR_INPUT, "%s: mlp_bias true is not modelled", path);
    /* LlamaAttention: bias=config.attention_bias on q, k, v and o; Qwen2Attention: bias=True on q, k, v
     * and False on o (modeling_llama.py, modeling_qwen2.py). */
    if (attention_bias && t != HF_LLAMA)
        return err_set(e, ERR_INPUT, "%s: attention_bias is not a %s field", path, type);
    m->bias = attention_bias;
    m->qkv_bias = t == HF_QWEN2;
    bool use_sw = t == HF_MISTRAL; /* Qwen2 gates its window with use_sliding_window */
    if (t == HF_QWEN2 && bool_field(root, path, "use_sliding_window", &use_sw, e))
        return -1;
    json_t *sw = json_object_get(root, "sliding_window");
    if (warn && use_sw && sw && !json_is_null(sw))
        fprintf(warn, "warning: %s: sliding_window is not modelled: attention is modelled as full causal "
                      "attention over the sequence\n", path);
    return 0;
}

int hf_config_load(const char *path, struct model_spec *m, FILE *warn, struct err *e)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root && je.line < 1) /* not read at all: jansson's text names the file */
        return err_set(e, ERR_INPUT, "%s", je.text);
    if (!root)
        return err_set(e, ERR_INPUT, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    int rc = json_is_object(root) ? fill(root, path, m, warn, e)
                                  : err_set(e, ERR_INPUT, "%s: expected a JSON object", path);
    json_decref(root);
    return rc;
}
