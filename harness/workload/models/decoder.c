/* decoder.c: decoder-only transformers as transformers writes them. GPT-2 (GPT2LMHeadModel: learned
 * positions, fused c_attn, LayerNorm, GELU MLP, biases, dropout inside the attention and MLP modules,
 * tied LM head) and Llama (LlamaForCausalLM: rotary, GQA, RMSNorm, SwiGLU, no biases, untied), chosen
 * by the model's positional scheme; both build their KV cache in training (use_cache) and end in
 * ForCausalLMLoss with labels = input_ids. The Llama form also carries the variants of the Hugging
 * Face decoders (hf_config.c): Qwen3's per-head q/k norms (in tf_attention), Gemma's sqrt(hidden)
 * embedding scale, Gemma2/3's norms after the attention and the MLP, Gemma2's final logit
 * soft-capping and GPT-NeoX's parallel residual. */
#include "workload/models/models.h"
#include "workload/fused_ce.h"
#include "workload/parallel_tensor.h"

#include <math.h>

static const struct tf_names gpt2_names = {
    .attn = "attn", .qkv = "c_attn", .o = "c_proj", .attn_drop = "resid_dropout", .attn_norm = "ln_1",
    .ffn = "mlp", .up = "c_fc", .act = "act", .down = "c_proj", .ffn_drop = "dropout", .ffn_norm = "ln_2",
};
static const struct tf_names llama_names = {
    .attn = "self_attn", .q = "q_proj", .k = "k_proj", .v = "v_proj", .o = "o_proj",
    .attn_norm = "input_layernorm", .ffn = "mlp", .gate = "gate_proj", .up = "up_proj", .act = "act_fn",
    .down = "down_proj", .ffn_norm = "post_attention_layernorm",
};

/* Gemma2DecoderLayer / Gemma3DecoderLayer (modeling_gemma2.py): input_layernorm, attention,
 * post_attention_layernorm, residual; pre_feedforward_layernorm, MLP, post_feedforward_layernorm,
 * residual. */
static const struct tf_names gemma_names = {
    .attn = "self_attn", .q = "q_proj", .k = "k_proj", .v = "v_proj", .o = "o_proj",
    .attn_norm = "input_layernorm", .ffn = "mlp", .gate = "gate_proj", .up = "up_proj", .act = "act_fn",
    .down = "down_proj", .ffn_norm = "pre_feedforward_layernorm",
};

static bool gpt2_style(const struct model_spec *m)
{
    return m->pos == POS_LEARNED;
}

/* A norm over a sub-block's output, which the layer rebinds (the output dies once normed). */
static tref post_norm(struct gen *g, const char *name, const struct model_spec *m, tref x)
{
    tref y = nn_norm(g, name, x, m->hidden, m->norm, m->norm_bias, 0);
    t_release(g, x);
    return y;
}

/* Gemma2ForCausalLM (modeling_gemma2.py): logits / cap, tanh, * cap, each rebinding logits. The
 * divisions by a Python number save nothing; TanhBackward saves its result. A tanh-form GELU stands
 * for the tanh: one fused kernel whose one saved tensor has the tanh result's size (kernels.h has no
 * tanh), so the memory is the tanh's and the kernel time that of an elementwise op of that size. */
static tref softcap(struct gen *g, const struct model_spec *m, tref logits)
{
    if (g->mode != GEN_RUN || m->logit_softcap <= 0)
        return logits;
    gen_push(g, "final_logit_softcapping");
    tref d = nn_scale(g, NULL, logits, 1.0f / m->logit_softcap);
    t_release(g, logits);
    tref t = nn_act(g, "tanh", d, ACT_GELU_TANH);
    t_release(g, d);
    tref y = nn_scale(g, NULL, t, m->logit_softcap);
    t_release(g, t);
    gen_pop(g);
    return y;
}

/* extra[0] = the attention mask, extra[1] and extra[2] = the rotary tables */
static tref decoder_layers(struct gen *g, const struct ckpt *c, tref x)
{
    const struct model_spec *m = c->model;
    bool gpt = gpt2_style(m);
    struct tf_cfg cfg = {
        .m = m, .nm = gpt ? &gpt2_names : m->sandwich_norm ? &gemma_names : &llama_names, .fused_qkv = gpt,
        .scale_op = true, .upcast_softmax = !gpt, .causal = true, .ffn_bias = m->bias, .attn_dropout = m->dropout,
        .out_dropout = gpt ? m->dropout : 0, .cache = tf_use_cache(g),
    };
    struct tf_ctx ctx = {.mask = c->extra[0], .bias = TNONE, .cos = c->extra[1], .sin = c->extra[2]};
    tref h = t_ref(g, x);
    for (int i = c->layer; i < c->layer + c->count; i++) {
        gen_push(g, gpt ? "h.%d" : "layers.%d", i);
        if (g->mode == GEN_PARAMS && !gpt) { /* LlamaDecoderLayer defines self_attn, mlp, then its norms */
            tf_attention(g, &cfg, &ctx, TNONE, TNONE);
            (m->experts ? tf_moe : tf_ffn)(g, &cfg, TNONE);
            nn_norm(g, cfg.nm->attn_norm, TNONE, m->hidden, m->norm, m->norm_bias, 0);
            if (m->sandwich_norm)
                nn_norm(g, "post_attention_layernorm", TNONE, m->hidden, m->norm, m->norm_bias, 0);
            nn_norm(g, cfg.nm->ffn_norm, TNONE, m->hidden, m->norm, m->norm_bias, 0);
            if (m->sandwich_norm)
                nn_norm(g, "post_feedforward_layernorm", TNONE, m->hidden, m->norm, m->norm_bias, 0);
            gen_pop(g);
            continue;
        }
        tref n1 = nn_norm(g, cfg.nm->attn_norm, h, m->hidden, m->norm, m->norm_bias, 0);
        tref a = tf_attention(g, &cfg, &ctx, n1, TNONE);
        t_release(g, n1);
        if (m->sandwich_norm)
            a = post_norm(g, "post_attention_layernorm", m, a);
        if (m->parallel_residual) { /* GPTNeoXLayer: mlp_output + attn_output + hidden_states */
            tref n2 = nn_norm(g, cfg.nm->ffn_norm, h, m->hidden, m->norm, m->norm_bias, 0);
            tref f = tf_ffn(g, &cfg, n2);
            t_release(g, n2);
            tref fa = nn_add(g, NULL, f, a);
            t_release(g, f);
            t_release(g, a);
            tref out = nn_add(g, NULL, fa, h);
            t_release(g, fa);
            t_release(g, h);
            h = out;
            gen_pop(g);
            continue;
        }
        tref r1 = nn_add(g, NULL, h, a);
        if (!gpt) /* LlamaDecoderLayer rebinds hidden_states: the attention output dies with the add */
            t_release(g, a);
        tref n2 = nn_norm(g, cfg.nm->ffn_norm, r1, m->hidden, m->norm, m->norm_bias, 0);
        tref f = (m->experts ? tf_moe : tf_ffn)(g, &cfg, n2);
        t_release(g, n2);
        if (m->sandwich_norm)
            f = post_norm(g, "post_feedforward_layernorm", m, f);
        tref out = nn_add(g, NULL, r1, f);
        t_release(g, r1);
        if (gpt) /* GPT2Block's attn_output local lives until the block returns */
            t_release(g, a);
        t_release(g, f);
        t_release(g, h); /* the caller's hidden_states holds the layer's input until the layer returns */
        h = out;
        gen_pop(g);
    }
    return h;
}

tref decoder_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    bool gpt = gpt2_style(m);
    tref ids = tf_ids(g, bt->b, bt->s, m->vocab, "input_ids"); /* labels = input_ids: one storage */
    gen_push(g, gpt ? "transformer" : "model");
    int32_t wte = nn_embedding_param(g, gpt ? "wte" : "embed_tokens", m->vocab, m->hidden);
    tref vmask, eids = tp_embedding_ids(g, ids, m->vocab, &vmask); /* tensor parallel: vocab-parallel */
    tref emb = nn_embedding(g, gpt ? "wte" : "embed_tokens", eids, m->vocab, m->hidden, wte);
    tp_embedding_masked(g, emb, vmask);
    t_release(g, eids);
    tref pos = tf_position_ids(g, bt->s, m->max_positions ? m->max_positions : bt->s);
    tref pe = TNONE, x = t_ref(g, emb), mask = TNONE, cos = TNONE, sin = TNONE;
    enum dtype dt = g->mode == GEN_RUN ? (enum dtype)g->t[emb].dtype : DT_F32;
    if (m->pos == POS_LEARNED) {
        pe = nn_embedding(g, "wpe", pos, m->max_positions, m->hidden, -1);
        tref s = nn_add(g, NULL, emb, pe);
        mask = tf_mask(g, bt->b, bt->s, bt->s, true, m->attn == ATTN_EAGER, dt);
        t_release(g, x);
        tref sp = tp_sequence_scatter(g, s); /* sequence parallel: this rank's tokens */
        t_release(g, s);
        x = nn_dropout(g, "drop", sp, m->dropout);
        t_release(g, sp);
    } else {
        mask = tf_mask(g, bt->b, bt->s, bt->s, true, m->attn == ATTN_EAGER, dt);
        nn_rotary_tables(g, bt->s, m->head_dim, dt, &cos, &sin);
        t_release(g, x);
        x = tp_sequence_scatter(g, emb); /* sequence parallel: the embedding reduce-scattered */
        if (m->embed_scale && g->mode == GEN_RUN) { /* hidden_states * normalizer: inputs_embeds stays */
            tref sc = nn_scale(g, "normalizer", x, sqrtf((float)m->hidden));
            t_release(g, x);
            x = sc;
        }
    }
    int every = tf_checkpoint_every(g, m->layers);
    for (int i = 0; i < m->layers; i += every) {
        struct ckpt c = {.fn = decoder_layers, .model = m, .layer = i,
                         .count = i + every <= m->layers ? every : m->layers - i, .extra = {mask, cos, sin, TNONE, TNONE}};
        tref y = nn_checkpoint(g, &c, x);
        t_release(g, x);
        x = y;
    }
    tref f = nn_norm(g, gpt ? "ln_f" : "norm", x, m->hidden, m->norm, m->norm_bias, 0);
    t_release(g, x);
    /* the model's forward returns: its locals go */
    t_release(g, emb);
    t_release(g, pe);
    t_release(g, pos);
    t_release(g, mask);
    t_release(g, cos);
    t_release(g, sin);
    gen_pop(g);
    bool head = g->in_head;
    g->in_head = true;
    if (loss && g->mode == GEN_RUN && spec_has_fix(&g->spec, FIX_FUSED_LINEAR_CROSS_ENTROPY)) {
        tref fl = nn_fused_lm_loss(g, f, m->tied_embeddings ? wte : -1, ids);
        g->in_head = head;
        t_release(g, f);
        t_release(g, ids);
        return fl;
    }
    tref fin = tp_column_input(g, f); /* tensor parallel: the LM head is column-parallel */
    t_release(g, f);
    tref logits = m->tied_embeddings ? nn_linear_tied(g, "lm_head", fin, wte)
                                     : nn_linear(g, "lm_head", fin, m->hidden, m->vocab, false);
    g->in_head = head;
    t_release(g, fin);
    logits = softcap(g, m, logits);
    tref out = logits;
    if (loss) {
        out = tp_vocab_loss(g) ? tp_lm_loss(g, logits, ids) : tf_lm_loss(g, logits, ids);
        t_release(g, logits);
    }
    t_release(g, ids);
    return out;
}
