"""hf.py: Hugging Face transformers models by name (configs written from the published dimensions, so
no weights and no download are needed) or from a config.json, and the batch and loss of one step.

Each named model's parameter count equals oomlab's preset of the same name (`oomlab list presets`);
tinyllama-1.1b has no preset and is written in a scenario with its dimensions.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

GPT2_DIMS = {"gpt2": (768, 12, 12), "gpt2-medium": (1024, 24, 16), "gpt2-large": (1280, 36, 20),
             "gpt2-xl": (1600, 48, 25)}
T5_DIMS = {"flan-t5-base": (768, 2048, 12, 12), "flan-t5-large": (1024, 2816, 24, 16),
           "flan-t5-xl": (2048, 5120, 24, 32)}
# hidden, intermediate, layers, heads, kv heads, vocab, positions, rope theta
LLAMA_DIMS = {"tinyllama-1.1b": (2048, 5632, 22, 32, 4, 32000, 2048, 10000.0),
              "llama-2-7b": (4096, 11008, 32, 32, 32, 32000, 4096, 10000.0),
              "llama-3-8b": (4096, 14336, 32, 32, 8, 128256, 8192, 500000.0)}
MODELS = ("bert-large-uncased",) + tuple(GPT2_DIMS) + tuple(T5_DIMS) + tuple(LLAMA_DIMS)


def _untie_t5_head(model):
    """FLAN-T5 (T5 v1.1) checkpoints have their own lm_head (247,577,856 parameters for -base), but
    transformers 5.x T5Config forces tie_word_embeddings=True and ties lm_head to shared (a
    tie_word_embeddings=False in the config only turns the decoder-output scaling off). Give the head
    its own weight, as the checkpoint has."""
    if model.lm_head.weight is model.shared.weight:
        model.lm_head.weight = nn.Parameter(torch.empty_like(model.shared.weight))


def build(name, attn="eager", config_path=None):
    """(kind, model, config, dims) with the model on meta; kind is encoder | causal_lm | seq2seq;
    dims a one-line description of the dimensions for the trace header."""
    import transformers as tf

    kw = {"attn_implementation": attn}
    with torch.device("meta"):
        if config_path:
            cfg = tf.AutoConfig.from_pretrained(config_path, **kw)
            kind = "seq2seq" if cfg.is_encoder_decoder else "causal_lm"
            cls = tf.AutoModelForSeq2SeqLM if kind == "seq2seq" else tf.AutoModelForCausalLM
            model = cls.from_config(cfg, **kw)
            return kind, model, cfg, f"{cfg.model_type} from {config_path}"
        if name == "bert-large-uncased":
            cfg = tf.BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                intermediate_size=4096, **kw)
            return "encoder", tf.BertModel(cfg), cfg, "BertModel hidden 1024, 24 layers, 16 heads, ffn 4096"
        if name in GPT2_DIMS:
            h, n, heads = GPT2_DIMS[name]
            cfg = tf.GPT2Config(n_embd=h, n_layer=n, n_head=heads, **kw)
            return ("causal_lm", tf.GPT2LMHeadModel(cfg), cfg,
                    f"GPT2LMHeadModel hidden {h}, {n} layers, {heads} heads, vocab 50257, tied head")
        if name in T5_DIMS:
            d, ff, n, heads = T5_DIMS[name]
            cfg = tf.T5Config(vocab_size=32128, d_model=d, d_kv=64, d_ff=ff, num_layers=n,
                              num_decoder_layers=n, num_heads=heads, feed_forward_proj="gated-gelu",
                              tie_word_embeddings=False, decoder_start_token_id=0, **kw)
            model = tf.T5ForConditionalGeneration(cfg)
            _untie_t5_head(model)
            return ("seq2seq", model, cfg, f"T5ForConditionalGeneration d_model {d}, d_ff {ff}, "
                    f"{n}+{n} layers, {heads} heads, gated-gelu (gelu_new), untied head")
        if name in LLAMA_DIMS:
            h, ff, n, heads, kv, vocab, pos, theta = LLAMA_DIMS[name]
            cfg = tf.LlamaConfig(hidden_size=h, intermediate_size=ff, num_hidden_layers=n,
                                 num_attention_heads=heads, num_key_value_heads=kv, vocab_size=vocab,
                                 max_position_embeddings=pos, rope_theta=theta, rms_norm_eps=1e-5,
                                 tie_word_embeddings=False, **kw)
            return ("causal_lm", tf.LlamaForCausalLM(cfg), cfg,
                    f"LlamaForCausalLM hidden {h}, intermediate {ff} (SwiGLU), {n} layers, {heads} heads, "
                    f"{kv} kv heads (GQA), vocab {vocab}, RMSNorm, RoPE theta {theta:g}, untied head")
    raise ValueError(f"unknown model {name!r} (one of {', '.join(MODELS)}, or give a config.json)")


def batch_maker(kind, cfg, batch, seq, target_len=0, attention_mask=False, use_cache=None):
    """make_batch() for record(): token ids (and labels) of a training batch, as a dataloader moved
    to the GPU would give them; attention_mask=True adds an all-ones (b, s) mask."""
    def make():
        b = {"input_ids": torch.randint(0, cfg.vocab_size, (batch, seq))}
        if kind == "encoder":
            b["token_type_ids"] = torch.zeros(batch, seq, dtype=torch.long)
        if attention_mask:
            b["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
        if kind == "encoder":
            b["labels"] = torch.randint(0, cfg.hidden_size, (batch,))
        elif kind == "seq2seq":
            b["labels"] = torch.randint(0, cfg.vocab_size, (batch, target_len or seq))
        else:
            b["labels"] = b["input_ids"]
        if use_cache is not None and kind != "encoder":
            b["use_cache"] = use_cache
        return b
    return make


def loss_fn(kind):
    """The loss of one step: the model's own LM loss; for the encoder (oomlab's encoder family),
    a parameter-free cross-entropy on BertModel's pooled output."""
    if kind != "encoder":
        return None

    def encoder_loss(out, batch):
        return F.cross_entropy(out.pooler_output, batch["labels"])
    return encoder_loss


def forward_fn(kind):
    """How the model is called with the batch: the encoder's labels go to the loss only."""
    if kind != "encoder":
        return None

    def encoder_forward(model, batch):
        return model(**{k: v for k, v in batch.items() if k != "labels"})
    return encoder_forward
