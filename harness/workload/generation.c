/* generation.c: job.kind generate, transformers' model.generate() on a decoder-only model with rotary
 * positions (LlamaForCausalLM and the models written like it: Mistral, Qwen2) or learned ones
 * (GPT2LMHeadModel: fused c_attn, LayerNorm, plain MLP, tied head), under torch.no_grad with the
 * weights in load_dtype. Each call is a prefill forward of the prompt (phase "prefill") and
 * new_tokens - 1 forwards of one token (phase "decode"); every forward's activations die as it returns.
 *
 * Followed (transformers 4.56 / main): GenerationMixin passes logits_to_keep=1, so
 * LlamaForCausalLM.forward runs lm_head on the last position only ([B, 1, vocab]); _sample copies those
 * logits to fp32 (`outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32)`), takes softmax and
 * multinomial when sampling (argmax otherwise), `del outputs`, and grows input_ids and attention_mask by
 * torch.cat (generation/utils.py). The KV cache (cache_utils.py): DynamicLayer.update is
 * `self.keys = torch.cat([self.keys, key_states], dim=-2)` (a new tensor one token longer per step, the
 * old one freed once rebound); StaticLayer.lazy_initialization allocates torch.zeros of
 * [B, kv_heads, max_cache_len, head_dim] at the first update and update() index_copy_s into it.
 * Masks (masking_utils.py): with a dynamic cache the 2-D attention mask is all ones, so SDPA runs
 * is_causal (prefill) or unmasked (decode) and none is built; a static cache pads the mask with zeros
 * to max_cache_len, so every forward gets a bool [B, 1, q, max_cache_len] mask (and SDPA with a mask
 * repeats GQA keys and values to every head: sdpa_attention.py use_gqa_in_sdpa); eager attention
 * always gets an additive [B, 1, q, kv_len] mask in the model's dtype.
 *
 * Deviations, by layout: a layer's keys and values are one packed [B, len, 2 kv_heads head_dim] tensor
 * (nn_attention.c's layout), so a dynamic step's reallocation holds the old and new copies of both at
 * once (transformers' two cats overlap one of them at a time); a static prefill packs the prompt's keys
 * and values into one temporary before copying them in; the prefill's last position is copied out for
 * the LM head ([B, 1, hidden]; PyTorch's view needs no copy), and GPT-2's query out of the fused c_attn
 * output ([B, q, hidden]; a view of it in PyTorch). Not modelled: cache_position and other [B, len]
 * index tensors of a few bytes per token, logits processors (none by default), stopping criteria. */
#include "workload/job_kinds.h"
#include "workload/models/models.h"

#include <stdlib.h>

static const struct tf_names llama_names = {
    .attn_norm = "input_layernorm", .ffn = "mlp", .gate = "gate_proj", .up = "up_proj", .act = "act_fn",
    .down = "down_proj", .ffn_norm = "post_attention_layernorm",
};
static const struct tf_names gpt2_names = {
    .attn_norm = "ln_1", .ffn = "mlp", .up = "c_fc", .act = "act", .down = "c_proj", .ffn_norm = "ln_2",
};

struct genctx {
    const struct model_spec *m;
    int64_t b, kvw;          /* batch; kv_heads * head_dim */
    int64_t len;             /* tokens in the cache */
    int64_t max;             /* static cache length */
    bool stat;
    bool gpt;                /* GPT-2 style (learned positions, fused c_attn), else Llama style */
    tref *cache;             /* per layer, packed keys and values */
    int32_t first;           /* the model's first parameter */
};

int generation_check(const struct job_spec *s, struct err *e)
{
    const struct model_spec *m = &s->model;
    const struct generate_spec *gs = &s->generate;
    if (m->family != FAMILY_DECODER || (m->pos != POS_ROTARY && m->pos != POS_LEARNED))
        return err_set(e, ERR_INPUT,
                       "job.kind generate: built for decoder models with rotary positions (Llama, Mistral, Qwen2) "
                       "or learned ones (GPT-2); this model is %s with %s positions", family_name(m->family),
                       pos_name(m->pos));
    if (gs->prompt_len < 1 || gs->new_tokens < 1)
        return err_set(e, ERR_INPUT, "job.generate: prompt_len and new_tokens must be at least 1");
    int64_t need = (int64_t)gs->prompt_len + gs->new_tokens;
    if (m->max_positions && need > m->max_positions)
        return err_set(e, ERR_INPUT, "job.generate: prompt_len + new_tokens = %lld exceeds the model's %d positions",
                       (long long)need, m->max_positions);
    if (gs->cache == CACHE_STATIC && gs->max_cache_len && gs->max_cache_len < need)
        return err_set(e, ERR_INPUT,
                       "job.generate.max_cache_len: %d cannot hold prompt_len + new_tokens = %lld (StaticCache's "
                       "index_copy_ would run past it)", gs->max_cache_len, (long long)need);
    if (gs->cache == CACHE_DYNAMIC && gs->max_cache_len)
        return err_set(e, ERR_INPUT, "job.generate.max_cache_len: only for cache: static");
    return 0;
}

uint64_t kv_cache_bytes(const struct model_spec *m, int64_t batch, int64_t tokens, enum dtype dt)
{
    return (uint64_t)m->layers * 2 * (uint64_t)m->kv_heads * (uint64_t)m->head_dim * (uint64_t)tokens *
           (uint64_t)batch * dtype_size(dt);
}

/* `len` elements of each of `rows` rows: from x's rows (src_width wide) at src_off into y's rows
 * (dst_width wide) at dst_off. */
static void copy_cols(struct gen *g, tref x, tref y, int64_t rows, int64_t len, int64_t src_width, int64_t src_off,
                      int64_t dst_width, int64_t dst_off, const char *tag)
{
    int64_t blocks[6] = {rows, len, src_width, src_off, dst_width, dst_off};
    kern_copy_blocks(g, x, y, blocks, false, tag);
}

/* Where a forward's new keys and values are: separate k and v projections, or columns of GPT-2's fused
 * c_attn output (k == v). */
struct kv_src {
    tref k, v;
    int64_t width, koff, voff;
};

static tref cache_tensor(struct gen *g, const struct genctx *c, int64_t len, enum dtype dt, const char *tag)
{
    int64_t d[3] = {c->b, len, 2 * c->kvw};
    return t_new(g, d, 3, dt, CAT_ACTIVATION, tag);
}

/* cache.update(key_states, value_states) for q new tokens; returns the cache the attention reads. */
static tref cache_update(struct gen *g, struct genctx *c, int layer, const struct kv_src *kv, int64_t q)
{
    const char *tag = gen_tag(g, "past_key_values");
    enum dtype dt = (enum dtype)g->t[kv->k].dtype;
    int64_t w = 2 * c->kvw, kw = c->kvw;
    tref *slot = &c->cache[layer];
    if (!c->stat) { /* torch.cat([keys, k]): one token longer, the old tensor freed when rebound */
        tref nw = cache_tensor(g, c, c->len + q, dt, tag);
        if (*slot != TNONE)
            copy_cols(g, *slot, nw, c->b, c->len * w, c->len * w, 0, (c->len + q) * w, 0, tag);
        int64_t rows = c->len ? c->b : c->b * q; /* decode appends one token per row of the batch */
        int64_t dw = c->len ? (c->len + q) * w : w, at = c->len * w;
        copy_cols(g, kv->k, nw, rows, kw, kv->width, kv->koff, dw, at, tag);
        copy_cols(g, kv->v, nw, rows, kw, kv->width, kv->voff, dw, at + kw, tag);
        t_release(g, *slot);
        *slot = nw;
        return nw;
    }
    if (*slot == TNONE) { /* torch.zeros([B, kv_heads, max_cache_len, head_dim]) for keys and values */
        *slot = cache_tensor(g, c, c->max, dt, tag);
        kern_fill(g, *slot, 0.0f, tag);
    }
    if (q == 1) { /* index_copy_ of one token per row of the batch */
        copy_cols(g, kv->k, *slot, c->b, kw, kv->width, kv->koff, c->max * w, c->len * w, tag);
        copy_cols(g, kv->v, *slot, c->b, kw, kv->width, kv->voff, c->max * w, c->len * w + kw, tag);
    } else { /* the prompt's keys and values packed, then copied in */
        tref pk = cache_tensor(g, c, q, dt, tag);
        copy_cols(g, kv->k, pk, c->b * q, kw, kv->width, kv->koff, w, 0, tag);
        copy_cols(g, kv->v, pk, c->b * q, kw, kv->width, kv->voff, w, kw, tag);
        copy_cols(g, pk, *slot, c->b, q * w, q * w, 0, c->max * w, c->len * w, tag);
        t_release(g, pk);
    }
    return *slot;
}

static tref attention(struct gen *g, struct genctx *c, int layer, tref h, tref cos, tref sin, tref mask, int64_t q)
{
    const struct model_spec *m = c->m;
    int64_t hid = m->hidden, hd = m->head_dim, heads = m->heads, kvh = m->kv_heads;
    bool qkv_bias = m->bias || m->qkv_bias;
    gen_push(g, c->gpt ? "attn" : "self_attn");
    tref qr, kv;
    g->lora = LORA_FULL; /* as tf_attention: adapters on q and v (GPT-2: on c_attn) */
    if (c->gpt) { /* c_attn(h).split(): q, k and v are views of one projection */
        int64_t width = (heads + 2 * kvh) * hd, d[3] = {c->b, q, heads * hd};
        tref qkv = nn_linear(g, "c_attn", h, hid, width, qkv_bias);
        g->lora = LORA_NONE;
        qr = nn_slice(g, "query", qkv, d, 3, c->b * q, heads * hd, width, 0);
        struct kv_src src = {qkv, qkv, width, heads * hd, (heads + kvh) * hd};
        kv = cache_update(g, c, layer, &src, q);
        t_release(g, qkv);
    } else {
        tref qp = nn_linear(g, "q_proj", h, hid, heads * hd, qkv_bias);
        g->lora = LORA_NONE;
        tref kp = nn_linear(g, "k_proj", h, hid, kvh * hd, qkv_bias);
        g->lora = LORA_FULL;
        tref vp = nn_linear(g, "v_proj", h, hid, kvh * hd, qkv_bias);
        g->lora = LORA_NONE;
        qr = nn_rotary(g, NULL, qp, heads, hd, cos, sin);
        tref kr = nn_rotary(g, NULL, kp, kvh, hd, cos, sin);
        t_release(g, qp);
        t_release(g, kp);
        struct kv_src src = {kr, vp, c->kvw, 0, 0};
        kv = cache_update(g, c, layer, &src, q);
        t_release(g, kr);
        t_release(g, vp);
    }
    struct attn_args a = {
        .heads = heads, .kv_heads = kvh, .head_dim = hd, .causal = !c->stat && q > 1,
        .eager = m->attn == ATTN_EAGER, .bias = TNONE, .mask = mask, .cache = TNONE, .upcast_softmax = !c->gpt,
        .scale_op = true,
    };
    tref ctx = nn_attention(g, NULL, qr, kv, kv, &a);
    t_release(g, qr);
    tref o = nn_linear(g, c->gpt ? "c_proj" : "o_proj", ctx, heads * hd, hid, m->bias);
    t_release(g, ctx);
    gen_pop(g);
    return o;
}

static tref layer(struct gen *g, struct genctx *c, int i, tref h, tref cos, tref sin, tref mask, int64_t q)
{
    const struct model_spec *m = c->m;
    struct tf_cfg cfg = {.m = m, .nm = c->gpt ? &gpt2_names : &llama_names, .ffn_bias = m->bias};
    gen_push(g, c->gpt ? "h.%d" : "layers.%d", i);
    tref n1 = nn_norm(g, cfg.nm->attn_norm, h, m->hidden, m->norm, m->norm_bias, 0);
    tref a = attention(g, c, i, n1, cos, sin, mask, q);
    t_release(g, n1);
    tref r1 = nn_add(g, NULL, h, a);
    if (!c->gpt) /* as decoder.c: LlamaDecoderLayer rebinds hidden_states, GPT2Block keeps attn_output */
        t_release(g, a);
    tref n2 = nn_norm(g, cfg.nm->ffn_norm, r1, m->hidden, m->norm, m->norm_bias, 0);
    tref f = (m->experts ? tf_moe : tf_ffn)(g, &cfg, n2);
    t_release(g, n2);
    tref out = nn_add(g, NULL, r1, f);
    t_release(g, r1);
    if (c->gpt)
        t_release(g, a);
    t_release(g, f);
    gen_pop(g);
    return out;
}

/* One forward of q tokens (ids [B, q]) after c->len cached ones: the last position's logits [B, 1, vocab]. */
static tref forward(struct gen *g, struct genctx *c, tref ids, int64_t q)
{
    const struct model_spec *m = c->m;
    g->cursor = c->first;
    gen_push(g, c->gpt ? "transformer" : "model");
    const char *embed = c->gpt ? "wte" : "embed_tokens";
    int32_t wte = nn_embedding_param(g, embed, m->vocab, m->hidden);
    tref x = nn_embedding(g, embed, ids, m->vocab, m->hidden, wte);
    enum dtype dt = (enum dtype)g->t[x].dtype;
    tref pos = tf_position_ids(g, q, c->len + q);
    if (c->gpt) { /* inputs_embeds + wpe(position_ids) */
        tref pe = nn_embedding(g, "wpe", pos, m->max_positions, m->hidden, -1);
        tref s = nn_add(g, NULL, x, pe);
        t_release(g, pe);
        t_release(g, x);
        x = s;
    }
    tref mask = TNONE, cos = TNONE, sin = TNONE;
    int64_t md[4] = {c->b, 1, q, c->stat ? c->max : c->len + q};
    if (m->attn == ATTN_EAGER) { /* eager_mask: an additive float mask, never skipped */
        mask = t_new(g, md, 4, dt, CAT_ACTIVATION, gen_tag(g, NULL));
        kern_fill(g, mask, 0.0f, gen_tag(g, NULL));
    } else if (c->stat) { /* sdpa_mask over the whole static cache (its padding is not all ones) */
        mask = t_new(g, md, 4, DT_U8, CAT_ACTIVATION, gen_tag(g, NULL));
    }
    if (!c->gpt)
        nn_rotary_tables(g, q, m->head_dim, dt, &cos, &sin);
    for (int i = 0; i < m->layers && !g->failed; i++) {
        tref y = layer(g, c, i, x, cos, sin, mask, q);
        t_release(g, x);
        x = y;
    }
    tref f = nn_norm(g, c->gpt ? "ln_f" : "norm", x, m->hidden, m->norm, m->norm_bias, 0);
    t_release(g, x);
    t_release(g, pos);
    t_release(g, mask);
    t_release(g, cos);
    t_release(g, sin);
    gen_pop(g);
    tref last = f;
    if (q > 1) { /* hidden_states[:, -1:, :] (logits_to_keep=1) */
        int64_t d[3] = {c->b, 1, m->hidden};
        last = nn_slice(g, "lm_head.logits_to_keep", f, d, 3, c->b, m->hidden, q * m->hidden, (q - 1) * m->hidden);
        t_release(g, f);
    }
    bool head = g->in_head;
    g->in_head = true;
    tref logits = m->tied_embeddings ? nn_linear_tied(g, "lm_head", last, wte)
                                     : nn_linear(g, "lm_head", last, m->hidden, m->vocab, false);
    g->in_head = head;
    t_release(g, last);
    return logits;
}

/* The next token from the logits: an fp32 copy, softmax and multinomial (or argmax); [B, 1] int64. */
static tref next_token(struct gen *g, const struct genctx *c, tref logits)
{
    const char *tag = gen_tag(g, "generate");
    int64_t vocab = c->m->vocab, d[2] = {c->b, vocab}, one[2] = {c->b, 1};
    tref scores = t_new(g, d, 2, DT_F32, CAT_TEMP, tag);
    kern_cast(g, logits, scores, tag);
    tref probs = TNONE;
    if (g->spec.generate.do_sample) {
        probs = t_new(g, d, 2, DT_F32, CAT_TEMP, tag);
        tref ts[2] = {scores, probs};
        kern(g, K_SOFTMAX_FWD, DT_F32, d, 2, ts, 2, NULL, 0, tag);
    }
    tref next = t_new(g, one, 2, DT_I64, CAT_OUTPUT, tag);
    kern_init_ids(g, next, vocab, tag); /* the multinomial's (argmax's) pick, as seeded ids */
    t_release(g, probs);
    t_release(g, scores);
    return next;
}

/* torch.cat([x, y], dim=-1) of [B, n] and [B, 1] int64 tensors: a new [B, n + 1], x freed. */
static tref append(struct gen *g, tref x, tref y, int64_t b, const char *leaf)
{
    const char *tag = gen_tag(g, leaf);
    int64_t n = g->t[x].dims[1], d[2] = {b, n + 1};
    tref z = t_new(g, d, 2, DT_I64, CAT_OUTPUT, tag);
    copy_cols(g, x, z, b, n, n, 0, n + 1, 0, tag);
    copy_cols(g, y, z, b, 1, 1, 0, n + 1, n, tag);
    t_release(g, x);
    return z;
}

static void generate_once(struct gen *g, struct genctx *c)
{
    const struct generate_spec *gs = &g->spec.generate;
    int64_t p = gs->prompt_len, d[2] = {c->b, p};
    gen_phase(g, gen_intern(g, "prefill"));
    /* torch.ones for the attention mask: no kernel here reads its values, so none writes them */
    tref ids = nn_ids(g, d, 2, c->m->vocab, "input_ids"), am = t_new(g, d, 2, DT_I64, CAT_INPUT, "attention_mask");
    c->len = 0;
    tref step_ids = t_ref(g, ids);
    for (int t = 0; t < gs->new_tokens && !g->failed; t++) {
        if (t == 1)
            gen_phase(g, gen_intern(g, "decode"));
        int64_t q = t == 0 ? p : 1;
        tref logits = forward(g, c, step_ids, q);
        c->len += q;
        t_release(g, step_ids);
        tref next = next_token(g, c, logits);
        t_release(g, logits); /* del outputs */
        ids = append(g, ids, next, c->b, "input_ids");
        tref ones = t_new2(g, c->b, 1, DT_I64, CAT_TEMP, "attention_mask");
        am = append(g, am, ones, c->b, "attention_mask");
        t_release(g, ones);
        step_ids = next;
    }
    t_release(g, step_ids);
    for (int i = 0; i < c->m->layers; i++) { /* the cache goes with the generate() call's return */
        t_release(g, c->cache[i]);
        c->cache[i] = TNONE;
    }
    t_release(g, am);
    t_release(g, ids); /* the generated sequences, copied to the host */
}

void generation_run(struct gen *g, const struct model_spec *m, int32_t first_param)
{
    const struct generate_spec *gs = &g->spec.generate;
    struct genctx c = {
        .m = m, .b = g->spec.batch, .kvw = (int64_t)m->kv_heads * m->head_dim, .stat = gs->cache == CACHE_STATIC,
        .gpt = m->pos == POS_LEARNED,
        .max = gs->max_cache_len ? gs->max_cache_len : (int64_t)gs->prompt_len + gs->new_tokens, .first = first_param,
    };
    c.cache = malloc((size_t)m->layers * sizeof *c.cache);
    if (!c.cache) {
        g->failed = err_set(g->e, ERR_INTERNAL, "generation: out of host memory");
        return;
    }
    for (int i = 0; i < m->layers; i++)
        c.cache[i] = TNONE;
    bool grad = g->grad_enabled, train = g->training;
    g->grad_enabled = false; /* torch.no_grad(), model.eval() */
    g->training = false;
    g->act_dtype = g->spec.param_dtype;
    for (int call = 1; call <= g->spec.steps && !g->failed; call++) {
        struct op op = {.kind = OP_STEP, .id = (uint64_t)call, .bytes = (uint64_t)c.b};
        gen_emit(g, &op);
        generate_once(g, &c);
    }
    g->grad_enabled = grad;
    g->training = train;
    free(c.cache);
}
