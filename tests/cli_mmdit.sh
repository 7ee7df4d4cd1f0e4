#!/bin/sh
# cli_mmdit.sh: small Flux- and SD3-shaped MMDiT models (full and LoRA, with and without gradient
# checkpointing) run every kernel of their op program on the host device, whose kernels check each
# call's shapes and offsets (the sim does not read values); a bad model key exits 2 naming it.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

# scenario NAME MODEL-KEYS JOB-KEYS
scenario() {
    cat > "$T/$1.yaml" <<DOC
name: $1
title: t
source: tests
model: { family: mmdit, layers: 2, hidden: 64, heads: 2, head_dim: 32, ffn: 256, cross_attention_dim: 32,
         pooled_dim: 16, attn: sdpa, $2 }
job: { batch_size: 2, image_size: 64, context_len: 8, param_dtype: bf16, load_dtype: bf16, steps: 2, $3 }
variants:
  before: { expect: { oom: false } }
  after: { fixes: [gradient_checkpointing], expect: { oom: false } }
DOC
}
scenario flux "in_channels: 16, single_layers: 2, qk_norm: true, guidance_embed: true" "trainable: lora, lora_rank: 4"
scenario sd3 "in_channels: 4, patch_size: 2, pos_embed_max: 8" "trainable: full"
for s in flux sd3; do
    out=$("$BIN" run --device host:1GiB "$T/$s.yaml" 2>&1); rc=$?
    ok $rc "$s runs on the host device (exit $rc)"
    ok $(contains "$out" "measured") "and its figures are measured ($(printf '%s' "$out" | head -1))"
done

scenario bad "in_channels: 16, patch_size: 40" ""
out=$("$BIN" run "$T/bad.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "patch_size 40 (at most 16) exits 2 (exit $rc)"
ok $(contains "$out" "model.patch_size must be from 0 to 16 for family mmdit, got 40") "naming the key ($out)"
done_testing
