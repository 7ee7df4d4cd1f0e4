"""transformers_models.t: small transformers models recorded end to end (skipped without transformers):
every parameter gets a grad and AdamW state, tags name the modules, padding questions are answered."""
import torch

from tap import done, eq, ok, skip_all
import oomlab_recorder as rec
from oomlab_recorder import hf
from oomlab_recorder.trace import Alloc

try:
    import transformers as tf
except ImportError:
    skip_all("transformers is not installed")

with torch.device("meta"):
    cfg = tf.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=128, vocab_size=1000, bos_token_id=0, eos_token_id=0)
    gpt = tf.GPT2LMHeadModel(cfg)
B, S = 2, 64
make = hf.batch_maker("causal_lm", cfg, B, S)
r = rec.record(gpt, make, steps=2, cublas_workspace=32 << 20)
allocs = [e for e in r.trace.events if isinstance(e, Alloc)]
n_params = len(list(gpt.parameters()))
eq(r.param_count, sum(p.numel() for p in gpt.parameters()), "parameter count (tied head counted once)")
eq(sum(1 for a in allocs if a.category == "param"), n_params + 0, "one param allocation per parameter")
eq(sum(1 for a in allocs if a.category == "grad"), 2 * n_params, "a grad per parameter in each of 2 steps")
eq(sum(1 for a in allocs if a.category == "optimizer_state"), 2 * n_params, "exp_avg and exp_avg_sq per parameter")
eq([a.tag for a in allocs if a.category == "input"], ["input_ids", "input_ids"],
   "inputs tagged by batch key, once per step (labels is the same tensor as input_ids)")
tags = {a.tag for a in allocs if a.category == "activation"}
ok({"transformer.h.0.attn", "transformer.h.1.mlp.act", "transformer.h.0.ln_1", "lm_head"} <= tags,
   "forward allocations carry module paths")
ok({"transformer.h.0.mlp.c_fc", "transformer.wte"} <= {a.tag for a in allocs if a.category == "temp"},
   "backward allocations carry the module of their autograd node")
# the logits: (b, s, vocab) fp32, tagged by the LM head
ok(any(a.tag == "lm_head" and a.nbytes == B * S * 1000 * 4 for a in allocs), "logits of b*s*vocab*4 bytes")
# gelu_new is a composite: its tanh/pow/mul outputs are separate ffn-sized tensors
ffn = B * S * 4 * 64 * 4
eq(sum(1 for a in allocs if a.tag == "transformer.h.0.mlp.act" and a.nbytes == ffn and a.category == "activation") // 2,
   8, "gelu_new: eight ffn-sized outputs per layer and step (a composite of eight ops)")

# BERT with a padded batch: transformers asks padding_mask.all(); the answer False builds the 4D mask
with torch.device("meta"):
    bcfg = tf.BertConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128,
                         vocab_size=500, attn_implementation="eager")
    bert = tf.BertModel(bcfg)
mk = hf.batch_maker("encoder", bcfg, B, S, attention_mask=True)
for answer, want, name in ((rec.answer_padded, True, "padded"), (rec.answer_unpadded, False, "unpadded")):
    rb = rec.record(bert, mk, hf.loss_fn("encoder"), steps=1, answer_item=answer, forward=hf.forward_fn("encoder"))
    masks = [e for e in rb.trace.events if isinstance(e, Alloc) and e.nbytes == B * S * S * 4 and e.category == "activation"
             and e.tag in ("BertModel",)]
    eq((bool(rb.item_answers), bool(masks)), (True, want), f"{name}: a (b,1,s,s) fp32 mask built: {want}")
done()
