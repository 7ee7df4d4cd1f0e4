/* hf_config.c: a model_spec from a Hugging Face config.json. One row per model_type: its name, the
 * preset whose architecture it starts from, and its reader, which reads every field that changes memory
 * with the defaults of transformers/models/<type>/configuration_<type>.py, and names (error or warning)
 * any such field the generator does not model. The field helpers are shared with readers in other
 * files (hf_config.h). */
#include "workload/hf_config.h"

#include <jansson.h>
#include <stdarg.h>
#include <string.h>

/* ---- field helpers ---- */

static json_t *get(struct hf_reader *r, const char *key)
{
    return json_object_get((json_t *)r->root, key);
}

bool hf_has(struct hf_reader *r, const char *key)
{
    json_t *v = get(r, key);
    return v && !json_is_null(v);
}

int hf_int(struct hf_reader *r, const char *key, bool required, int *out, struct err *e)
{
    json_t *v = get(r, key);
    if (!v || json_is_null(v))
        return required ? err_set(e, ERR_INPUT, "%s: missing required field '%s'", r->path, key) : 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 30))
        return err_set(e, ERR_INPUT, "%s: field '%s' must be a whole number from 1", r->path, key);
    *out = (int)json_integer_value(v);
    return 0;
}

int hf_bool(struct hf_reader *r, const char *key, bool *out, struct err *e)
{
    json_t *v = get(r, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return err_set(e, ERR_INPUT, "%s: field '%s' must be true or false", r->path, key);
    *out = json_is_true(v);
    return 0;
}

int hf_str(struct hf_reader *r, const char *key, const char **out, struct err *e)
{
    json_t *v = get(r, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return err_set(e, ERR_INPUT, "%s: field '%s' must be a string", r->path, key);
    *out = json_string_value(v);
    return 0;
}

int hf_number(struct hf_reader *r, const char *key, double *out, struct err *e)
{
    json_t *v = get(r, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || json_number_value(v) < 0)
        return err_set(e, ERR_INPUT, "%s: field '%s' must be a number from 0", r->path, key);
    *out = json_number_value(v);
    return 0;
}

/* transformers/activations.py ACT2FN names; each is one fused kernel except gelu_new's composite. */
int hf_act(struct hf_reader *r, const char *key, enum act_kind *out, struct err *e)
{
    static const struct { const char *name; enum act_kind act; } acts[] = {
        {"gelu", ACT_GELU}, {"gelu_pytorch_tanh", ACT_GELU_TANH}, {"gelu_new", ACT_GELU_NEW},
        {"silu", ACT_SILU}, {"swish", ACT_SILU}, {"relu", ACT_RELU}, {"quick_gelu", ACT_QUICK_GELU},
    };
    const char *s = NULL;
    if (!hf_has(r, key))
        return 0;
    if (hf_str(r, key, &s, e))
        return -1;
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (!strcmp(s, acts[i].name)) {
            *out = acts[i].act;
            return 0;
        }
    return err_set(e, ERR_INPUT, "%s: %s '%s' is not modelled (gelu, gelu_pytorch_tanh, gelu_new, silu, relu, "
                   "quick_gelu)", r->path, key, s);
}

int hf_architecture(struct hf_reader *r, const char **out, struct err *e)
{
    json_t *v = get(r, "architectures");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) < 1 || !json_is_string(json_array_get(v, 0)))
        return err_set(e, ERR_INPUT, "%s: field 'architectures' must be a list of class names", r->path);
    *out = json_string_value(json_array_get(v, 0));
    return 0;
}

int hf_num_labels(struct hf_reader *r, int *out, struct err *e)
{
    json_t *ids = get(r, "id2label");
    *out = 2; /* PretrainedConfig: num_labels 2 unless id2label says otherwise */
    if (ids && !json_is_null(ids)) {
        if (!json_is_object(ids) || json_object_size(ids) < 1)
            return err_set(e, ERR_INPUT, "%s: field 'id2label' must be an object of labels", r->path);
        *out = (int)json_object_size(ids);
    }
    if (hf_int(r, "num_labels", false, out, e))
        return -1;
    if (*out == 1)
        return err_set(e, ERR_INPUT, "%s: num_labels 1 is regression (MSELoss), not modelled", r->path);
    return 0;
}

void hf_warn(struct hf_reader *r, const char *fmt, ...)
{
    if (!r->warn)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(r->warn, "warning: %s: ", r->path);
    vfprintf(r->warn, fmt, ap);
    fputc('\n', r->warn);
    va_end(ap);
}

void hf_note(struct hf_reader *r, const char *fmt, ...)
{
    char *n = r->info->notes;
    size_t used = strlen(n), len = sizeof r->info->notes;
    if (used && used + 2 < len) {
        memcpy(n + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    if (used < len)
        vsnprintf(n + used, len - used, fmt, ap);
    va_end(ap);
}

/* ---- fields every family shares ---- */

/* torch_dtype (transformers 5: dtype): the dtype from_pretrained loads the weights in by default. */
static int read_dtype(struct hf_reader *r, struct err *e)
{
    static const struct { const char *name; enum dtype dt; } dts[] = {
        {"float32", DT_F32}, {"bfloat16", DT_BF16}, {"float16", DT_F16},
    };
    const char *key = hf_has(r, "dtype") ? "dtype" : "torch_dtype", *s = NULL;
    if (hf_str(r, key, &s, e))
        return -1;
    if (!s)
        return 0;
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++)
        if (!strcmp(s, dts[i].name)) {
            r->info->has_dtype = true;
            r->info->dtype = dts[i].dt;
            return 0;
        }
    return err_set(e, ERR_INPUT, "%s: %s '%s' is not modelled (float32, bfloat16, float16)", r->path, key, s);
}

/* Fields of other architectures that change memory: an error, never ignored. */
static int refuse_foreign(struct hf_reader *r, struct err *e)
{
    static const char *const moe[] = {"num_local_experts", "num_experts", "n_routed_experts"};
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++)
        if (hf_has(r, moe[i]) && !(r->m->experts && !strcmp(moe[i], "num_local_experts")))
            return err_set(e, ERR_INPUT, "%s: %s is not modelled for model_type %s (mixture of experts)", r->path,
                           moe[i], r->type);
    bool flag = false;
    if (hf_bool(r, "add_cross_attention", &flag, e) || (flag && err_set(e, ERR_INPUT,
        "%s: add_cross_attention true is not modelled", r->path)))
        return -1;
    return 0;
}

/* masking_utils' _ignore_causal_mask_sdpa skips the mask while kv_length < local_attention_size: below
 * the window, full causal attention is what transformers runs; from it on, a windowed mask is built. */
static void warn_window(struct hf_reader *r)
{
    hf_warn(r, "sliding_window is not modelled: attention is modelled as full causal attention over the sequence, "
               "exact below the window; from seq_len = window on, transformers builds a [1, 1, S, S] bool mask for "
               "SDPA (then memory-efficient, not flash), not modelled (eager's scores are [B, heads, S, S] either "
               "way)");
}

/* rope_scaling (an object or null): rescales the rotary frequencies; the tables keep their size. */
static int read_rope(struct hf_reader *r, struct err *e)
{
    json_t *v = get(r, "rope_scaling");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return err_set(e, ERR_INPUT, "%s: field 'rope_scaling' must be an object or null", r->path);
    json_t *t = json_object_get(v, "rope_type");
    t = t ? t : json_object_get(v, "type");
    hf_note(r, "rope_scaling %s: rotary tables of the same size", json_is_string(t) ? json_string_value(t) : "?");
    return 0;
}

/* The dimensions every transformer config names, each family under its own keys (ffn NULL: read apart). */
struct dim_keys {
    const char *hidden, *layers, *heads, *ffn, *vocab;
};
static const struct dim_keys hf_keys = {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                                        "vocab_size"};

static int core_dims(struct hf_reader *r, const struct dim_keys *k, struct err *e)
{
    struct model_spec *m = r->m;
    return hf_int(r, k->hidden, true, &m->hidden, e) || hf_int(r, k->layers, true, &m->layers, e) ||
                   hf_int(r, k->heads, true, &m->heads, e) || (k->ffn && hf_int(r, k->ffn, true, &m->ffn, e)) ||
                   hf_int(r, k->vocab, true, &m->vocab, e)
               ? -1
               : 0;
}

/* A share of each head rotated (GPT-NeoX's rotary_pct, Phi3's and others' partial_rotary_factor): the
 * rotated slice and the pass-through concatenated back make a tensor of the whole head's size. */
static int read_partial_rotary(struct hf_reader *r, const char *key, double dflt, struct err *e)
{
    double share = dflt;
    if (hf_number(r, key, &share, e))
        return -1;
    if (share < 1)
        hf_note(r, "%s %g: rotary modelled over the whole head (the rotated share and the rest are concatenated "
                   "into a tensor of the same size)", key, share);
    return 0;
}

/* ---- Llama-style decoders: llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, gemma3_text ---- */

/* LlamaConfig and its descendants: num_key_value_heads = num_attention_heads, head_dim = hidden_size /
 * num_attention_heads, tie_word_embeddings false, hidden_act "silu", attention_bias false; the Gemma
 * configs differ (read_gemma). */
static int llama_dims(struct hf_reader *r, const char *act_key, struct err *e)
{
    struct model_spec *m = r->m;
    m->kv_heads = 0;
    m->max_positions = 0; /* rotary: no learned table, so an absent count is not an error */
    bool attention_bias = false, mlp_bias = false;
    double drop = 0;
    if (core_dims(r, &hf_keys, e) || hf_int(r, "num_key_value_heads", false, &m->kv_heads, e) ||
        hf_int(r, "head_dim", false, &m->head_dim, e) ||
        hf_int(r, "max_position_embeddings", false, &m->max_positions, e) ||
        hf_bool(r, "tie_word_embeddings", &m->tied_embeddings, e) || hf_act(r, act_key, &m->act, e) ||
        hf_bool(r, "attention_bias", &attention_bias, e) || hf_bool(r, "mlp_bias", &mlp_bias, e) ||
        hf_number(r, "attention_dropout", &drop, e) || read_rope(r, e) ||
        read_partial_rotary(r, "partial_rotary_factor", 1.0, e))
        return -1;
    if (m->kv_heads && m->heads % m->kv_heads)
        return err_set(e, ERR_INPUT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", r->path,
                       m->heads, m->kv_heads);
    if (mlp_bias)
        return err_set(e, ERR_INPUT, "%s: mlp_bias true is not modelled", r->path);
    m->bias = attention_bias; /* LlamaAttention: bias=config.attention_bias on q, k, v and o */
    m->dropout = (float)drop;
    return 0;
}

/* Mistral always windows when sliding_window is set; Qwen2/Qwen3 only with use_sliding_window. */
static int llama_window(struct hf_reader *r, bool gated, struct err *e)
{
    bool use = !gated;
    if (gated && hf_bool(r, "use_sliding_window", &use, e))
        return -1;
    if (use && hf_has(r, "sliding_window"))
        warn_window(r);
    return 0;
}

static int refuse_field(struct hf_reader *r, const char *key, struct err *e)
{
    bool on = false;
    if (hf_bool(r, key, &on, e))
        return -1;
    return on ? err_set(e, ERR_INPUT, "%s: %s is not a %s field", r->path, key, r->type) : 0;
}

static int read_llama(struct hf_reader *r, struct err *e)
{
    return llama_dims(r, "hidden_act", e);
}

static int read_mistral(struct hf_reader *r, struct err *e)
{
    return llama_dims(r, "hidden_act", e) || refuse_field(r, "attention_bias", e) || llama_window(r, false, e);
}

/* Qwen2Attention: bias=True on q, k and v, False on o (modeling_qwen2.py). */
static int read_qwen2(struct hf_reader *r, struct err *e)
{
    r->m->qkv_bias = true;
    return llama_dims(r, "hidden_act", e) || refuse_field(r, "attention_bias", e) || llama_window(r, true, e);
}

/* Qwen3Config: head_dim 128; Qwen3Attention: q_norm and k_norm (Qwen3RMSNorm over head_dim) on the
 * projections before rotary, bias=config.attention_bias on q, k, v and o (modeling_qwen3.py). */
static int read_qwen3(struct hf_reader *r, struct err *e)
{
    r->m->head_dim = 128;
    r->m->qk_norm = true;
    return llama_dims(r, "hidden_act", e) || llama_window(r, true, e);
}

/* Fused projections as separate ones: the same parameters. Phi3MLP chunks gate_up_proj's output and
 * saves both halves (silu saves the gate, the product the up half): what separate gate and up
 * projections save. Phi3Attention slices q, k and v out of qkv_proj's output; the saved v slice keeps
 * the whole output alive, the q and k parts too, which separate projections free after rotary. */
static void note_fused_qkv(struct hf_reader *r, const char *qkv)
{
    struct model_spec *m = r->m;
    int kv = m->kv_heads ? m->kv_heads : m->heads, hd = m->head_dim ? m->head_dim : m->hidden / m->heads;
    hf_warn(r, "the fused %s is modelled as separate q, k, v projections (the same parameters, in three tensors "
               "instead of one); its saved v slice keeps the q and k parts alive too: %d more elements per token "
               "per layer than modelled", qkv, (m->heads + kv) * hd);
}

/* Phi3Config: no attention_bias (qkv_proj and o_proj without biases), resid_pdrop and embd_pdrop
 * dropouts, a sliding_window used by its attention (modeling_phi3.py). */
static int read_phi3(struct hf_reader *r, struct err *e)
{
    double resid = 0, embd = 0;
    if (llama_dims(r, "hidden_act", e) || refuse_field(r, "attention_bias", e) ||
        hf_number(r, "resid_pdrop", &resid, e) || hf_number(r, "embd_pdrop", &embd, e) || llama_window(r, false, e))
        return -1;
    if (resid > 0 || embd > 0)
        return err_set(e, ERR_INPUT, "%s: %s %g is not modelled (Phi3's residual and embedding dropouts)", r->path,
                       resid > 0 ? "resid_pdrop" : "embd_pdrop", resid > 0 ? resid : embd);
    note_fused_qkv(r, "qkv_proj");
    hf_note(r, "phi3: gate_up_proj as gate_proj and up_proj (the same saved tensors and parameters, in two "
               "tensors instead of one)");
    return 0;
}

/* A Gemma soft-capping field: absent means the config class's default, null means none. */
static int softcap_field(struct hf_reader *r, const char *key, double dflt, double *out, struct err *e)
{
    *out = get(r, key) ? 0 : dflt;
    return hf_number(r, key, out, e);
}

/* GemmaConfig, Gemma2Config, Gemma3TextConfig: head_dim 256, tie_word_embeddings true, gelu_pytorch_tanh;
 * the embeddings scaled by sqrt(hidden_size) (a new tensor); Gemma's RMSNorm, x * (1 + weight) in fp32,
 * as Llama's composite. Gemma2/3 add the post-attention and post-feed-forward norms and a
 * sliding_window (default 4096) on some layers; Gemma2 soft-caps the final logits (default 30) and, in
 * eager attention only, the attention scores (default 50); Gemma3 has q/k norms and no soft-capping by default. */
static int read_gemma_family(struct hf_reader *r, int gen, struct err *e)
{
    struct model_spec *m = r->m;
    m->head_dim = 256;
    m->tied_embeddings = true;
    m->act = ACT_GELU_TANH;
    m->embed_scale = true;
    m->sandwich_norm = gen >= 2;
    m->qk_norm = gen >= 3;
    double final_cap = 0, attn_cap = 0;
    if (llama_dims(r, gen == 1 ? "hidden_act" : "hidden_activation", e) ||
        softcap_field(r, "final_logit_softcapping", gen == 2 ? 30.0 : 0, &final_cap, e) ||
        softcap_field(r, "attn_logit_softcapping", gen == 2 ? 50.0 : 0, &attn_cap, e))
        return -1;
    m->logit_softcap = (float)final_cap;
    m->attn_softcap = (float)attn_cap;
    if (attn_cap > 0)
        hf_note(r, "attn_logit_softcapping %g: applied by eager attention (three more score-sized tensors, one "
                   "saved); SDPA applies none, as transformers' sdpa path ignores it", attn_cap);
    if (gen >= 2 && (!get(r, "sliding_window") || hf_has(r, "sliding_window")))
        warn_window(r);
    hf_note(r, "%s: RMSNorm x * (1 + weight) modelled as Llama's RMSNorm composite", r->type);
    return 0;
}

static int read_gemma(struct hf_reader *r, struct err *e) { return read_gemma_family(r, 1, e); }
static int read_gemma2(struct hf_reader *r, struct err *e) { return read_gemma_family(r, 2, e); }
static int read_gemma3(struct hf_reader *r, struct err *e) { return read_gemma_family(r, 3, e); }

/* GPTNeoXConfig: rotary_pct 0.25, use_parallel_residual true, attention_bias true, hidden_act gelu,
 * tie_word_embeddings false; LayerNorms with biases; a plain dense_h_to_4h / dense_4h_to_h MLP with
 * biases; query_key_value fused; embed_out untied (modeling_gpt_neox.py). */
static int read_gpt_neox(struct hf_reader *r, struct err *e)
{
    struct model_spec *m = r->m;
    m->norm = NORM_LAYERNORM;
    m->norm_bias = true;
    m->ffn_kind = FFN_MLP;
    m->act = ACT_GELU;
    m->parallel_residual = true;
    double hdrop = 0;
    if (llama_dims(r, "hidden_act", e) || hf_bool(r, "use_parallel_residual", &m->parallel_residual, e) ||
        read_partial_rotary(r, "rotary_pct", 0.25, e) || hf_number(r, "hidden_dropout", &hdrop, e))
        return -1;
    m->bias = true;
    if (hf_bool(r, "attention_bias", &m->bias, e))
        return -1;
    if (!m->bias)
        return err_set(e, ERR_INPUT, "%s: attention_bias false is not modelled for gpt_neox", r->path);
    if (hdrop > 0)
        return err_set(e, ERR_INPUT, "%s: hidden_dropout %g is not modelled", r->path, hdrop);
    note_fused_qkv(r, "query_key_value");
    return 0;
}

/* GPT2Config: n_inner null = 4 * n_embd, activation_function gelu_new, tie_word_embeddings true,
 * resid_pdrop = embd_pdrop = attn_pdrop = 0.1 (one dropout probability here). */
static int read_gpt2(struct hf_reader *r, struct err *e)
{
    struct model_spec *m = r->m;
    double drop[3] = {0.1, 0.1, 0.1};
    bool upcast = false;
    m->ffn = 0;
    m->tied_embeddings = true;
    static const struct dim_keys keys = {"n_embd", "n_layer", "n_head", NULL, "vocab_size"};
    if (core_dims(r, &keys, e) || hf_int(r, "n_positions", true, &m->max_positions, e) ||
        hf_int(r, "n_inner", false, &m->ffn, e) ||
        hf_act(r, "activation_function", &m->act, e) || hf_bool(r, "tie_word_embeddings", &m->tied_embeddings, e) ||
        hf_number(r, "resid_pdrop", &drop[0], e) || hf_number(r, "embd_pdrop", &drop[1], e) ||
        hf_number(r, "attn_pdrop", &drop[2], e) || hf_bool(r, "reorder_and_upcast_attn", &upcast, e))
        return -1;
    if (!m->ffn)
        m->ffn = 4 * m->hidden;
    if (upcast)
        return err_set(e, ERR_INPUT, "%s: reorder_and_upcast_attn true is not modelled", r->path);
    if (drop[1] != drop[0] || drop[2] != drop[0])
        return err_set(e, ERR_INPUT, "%s: embd_pdrop and attn_pdrop differing from resid_pdrop %g are not modelled "
                       "(one dropout probability)", r->path, drop[0]);
    m->dropout = (float)drop[0];
    return 0;
}

/* BertConfig / RobertaConfig: max_position_embeddings 512, type_vocab_size 2, hidden_act gelu,
 * hidden_dropout_prob = attention_probs_dropout_prob = 0.1, position_embedding_type "absolute"; the
 * model is BertModel / RobertaModel with its pooler. RoBERTa's position ids start after its
 * padding_idx, so its 514 positions hold 512 tokens. */
static int read_bert(struct hf_reader *r, struct err *e)
{
    struct model_spec *m = r->m;
    double drop = 0.1, adrop = 0.1;
    const char *pos = "absolute";
    m->max_positions = 512;
    m->type_vocab = 2;
    m->act = ACT_GELU;
    if (core_dims(r, &hf_keys, e) || hf_int(r, "max_position_embeddings", false, &m->max_positions, e) ||
        hf_int(r, "type_vocab_size", false, &m->type_vocab, e) || hf_act(r, "hidden_act", &m->act, e) ||
        hf_number(r, "hidden_dropout_prob", &drop, e) || hf_number(r, "attention_probs_dropout_prob", &adrop, e) ||
        hf_str(r, "position_embedding_type", &pos, e))
        return -1;
    if (strcmp(pos, "absolute"))
        return err_set(e, ERR_INPUT, "%s: position_embedding_type '%s' is not modelled (absolute)", r->path, pos);
    if (adrop != drop)
        return err_set(e, ERR_INPUT, "%s: attention_probs_dropout_prob %g differing from hidden_dropout_prob %g is "
                       "not modelled", r->path, adrop, drop);
    m->dropout = (float)drop;
    /* BertForSequenceClassification: dropout + classifier on the pooled output; RobertaForSequence-
     * Classification: no pooler (add_pooling_layer=False), its RobertaClassificationHead (encoder.c).
     * classifier_dropout null means hidden_dropout_prob. */
    const char *arch = NULL;
    double cdrop = drop;
    if (hf_architecture(r, &arch, e) || hf_number(r, "classifier_dropout", &cdrop, e))
        return -1;
    if (arch && strstr(arch, "ForSequenceClassification")) {
        if (hf_num_labels(r, &m->num_labels, e))
            return -1;
        if (cdrop != drop)
            return err_set(e, ERR_INPUT, "%s: classifier_dropout %g differing from hidden_dropout_prob %g is not "
                           "modelled", r->path, cdrop, drop);
        m->pooler = strcmp(r->type, "roberta") != 0;
    }
    if (!strcmp(r->type, "roberta"))
        hf_note(r, "roberta: %d positions hold %d tokens (ids start after padding_idx); tags are BertModel's",
                m->max_positions, m->max_positions - 2);
    return 0;
}

/* T5Config: d_kv 64, num_decoder_layers = num_layers, relative_attention_num_buckets 32,
 * dropout_rate 0.1, feed_forward_proj "relu" ("gated-ACT": a gated unit; "gated-gelu" means
 * gelu_new), tie_word_embeddings true (configuration_t5.py). */
static int read_t5(struct hf_reader *r, struct err *e)
{
    struct model_spec *m = r->m;
    const char *proj = "relu";
    double drop = 0.1;
    m->head_dim = 64;
    m->decoder_layers = 0;
    m->rel_buckets = 32;
    m->tied_embeddings = true;
    static const struct dim_keys keys = {"d_model", "num_layers", "num_heads", "d_ff", "vocab_size"};
    if (core_dims(r, &keys, e) || hf_int(r, "d_kv", false, &m->head_dim, e) ||
        hf_int(r, "num_decoder_layers", false, &m->decoder_layers, e) ||
        hf_int(r, "relative_attention_num_buckets", false, &m->rel_buckets, e) ||
        hf_bool(r, "tie_word_embeddings", &m->tied_embeddings, e) || hf_number(r, "dropout_rate", &drop, e) ||
        hf_str(r, "feed_forward_proj", &proj, e))
        return -1;
    bool gated = !strncmp(proj, "gated-", 6);
    const char *act = gated ? proj + 6 : proj;
    static const struct { const char *name; enum act_kind gated, plain; } acts[] = {
        {"gelu", ACT_GELU_NEW, ACT_GELU}, {"relu", ACT_RELU, ACT_RELU}, {"silu", ACT_SILU, ACT_SILU},
        {"gelu_new", ACT_GELU_NEW, ACT_GELU_NEW},
    };
    size_t i = 0;
    while (i < sizeof acts / sizeof acts[0] && strcmp(act, acts[i].name))
        i++;
    if (i == sizeof acts / sizeof acts[0] || strchr(act, '-'))
        return err_set(e, ERR_INPUT, "%s: feed_forward_proj '%s' is not modelled (relu, gated-gelu, gated-silu, ...)",
                       r->path, proj);
    m->ffn_kind = gated ? FFN_GATED : FFN_MLP;
    m->act = gated ? acts[i].gated : acts[i].plain;
    m->dropout = (float)drop;
    return 0;
}

/* MixtralConfig (configuration_mixtral.py): Mistral's attention and norms, the MLP replaced by
 * MixtralSparseMoeBlock (modeling_mixtral.py): gate (hidden -> num_local_experts, no bias), softmax in
 * fp32, top num_experts_per_tok, then per expert a w1/w3/w2 SwiGLU on its tokens. */
static int read_mixtral(struct hf_reader *r, struct err *e)
{
    struct model_spec *m = r->m;
    double jitter = 0;
    if (read_mistral(r, e) || hf_int(r, "num_local_experts", true, &m->experts, e) ||
        hf_int(r, "num_experts_per_tok", true, &m->experts_top_k, e) ||
        hf_number(r, "router_jitter_noise", &jitter, e) ||
        hf_bool(r, "output_router_logits", &m->router_logits_out, e))
        return -1;
    if (m->experts_top_k > m->experts)
        return err_set(e, ERR_INPUT, "%s: num_experts_per_tok %d exceeds num_local_experts %d", r->path,
                       m->experts_top_k, m->experts);
    if (jitter > 0) /* training multiplies the block's input by a uniform_ tensor of its size */
        return err_set(e, ERR_INPUT, "%s: router_jitter_noise %g is not modelled (0 is)", r->path, jitter);
    if (m->router_logits_out)
        hf_warn(r, "output_router_logits true is not modelled: the router logits of every layer kept for the "
                "auxiliary load-balancing loss, and that loss's temporaries, are not counted");
    return 0;
}

/* ---- the table ---- */

struct hf_type {
    const char *name;
    const char *base; /* the preset whose architecture the reader starts from */
    int (*read)(struct hf_reader *r, struct err *e);
};

static const struct hf_type types[] = {
    {"llama", "llama-3-8b", read_llama},         {"mistral", "llama-3-8b", read_mistral},
    {"qwen2", "llama-3-8b", read_qwen2},         {"qwen3", "llama-3-8b", read_qwen3},
    {"phi3", "llama-3-8b", read_phi3},           {"gemma", "llama-3-8b", read_gemma},
    {"gemma2", "llama-3-8b", read_gemma2},       {"gemma3_text", "llama-3-8b", read_gemma3},
    {"gpt_neox", "llama-3-8b", read_gpt_neox},   {"gpt2", "gpt2", read_gpt2},
    {"bert", "bert-large-uncased", read_bert},   {"roberta", "bert-large-uncased", read_bert},
    {"t5", "flan-t5-base", read_t5},             {"mixtral", "llama-3-8b", read_mixtral},
    {"vit", "vit-base-patch16-224", hf_read_vit}, {"clip", "clip-vit-l14-vision", hf_read_clip},
    {"clip_vision_model", "clip-vit-l14-vision", hf_read_clip_vision},
};

void hf_config_types_text(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0] && used < len; i++)
        if (types[i].base)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", types[i].name);
}

static int fill(struct hf_reader *r, struct err *e)
{
    if (hf_str(r, "model_type", &r->type, e))
        return -1;
    if (!r->type)
        return err_set(e, ERR_INPUT, "%s: missing required field 'model_type'", r->path);
    const struct hf_type *t = NULL;
    for (size_t i = 0; i < sizeof types / sizeof types[0] && !t; i++)
        t = strcmp(r->type, types[i].name) ? NULL : &types[i];
    if (!t) {
        char list[512];
        hf_config_types_text(list, sizeof list);
        return err_set(e, ERR_INPUT, "%s: model_type '%s' is not supported (%s)", r->path, r->type, list);
    }
    if (t->base) {
        if (preset_apply(r->m, t->base, e))
            return -1;
        r->m->preset[0] = r->m->expanded_from[0] = 0;
        r->m->head_dim = 0;
        r->m->tied_embeddings = false;
    }
    return t->read(r, e) || read_dtype(r, e) || refuse_foreign(r, e) ? -1 : 0;
}

int hf_config_read(const char *path, struct model_spec *m, struct hf_config_info *info, FILE *warn, struct err *e)
{
    struct hf_config_info local;
    info = info ? info : &local;
    memset(info, 0, sizeof *info);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root && je.line < 1) /* not read at all: jansson's text names the file */
        return err_set(e, ERR_INPUT, "%s", je.text);
    if (!root)
        return err_set(e, ERR_INPUT, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    struct hf_reader r = {.root = root, .path = path, .m = m, .info = info, .warn = warn};
    int rc = json_is_object(root) ? fill(&r, e) : err_set(e, ERR_INPUT, "%s: expected a JSON object", path);
    json_decref(root);
    return rc;
}
