#!/bin/sh
# cli_hf_config.sh: `oomlab fit --hf-config`: the shipped Hugging Face configs (written from the
# published config.json of each model) build their exact published parameter counts and get a batch
# answer; bad configs exit 2 naming the field, with no table printed.
BIN=${OOMLAB_BIN:-build/oomlab}
D=$(dirname "$0")/data/hf
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

# exact counts, one config per family (the published config.json; the published safetensors total,
# tied heads counted once): Llama-style untied with GQA; Qwen2 tied, q/k/v biases; Qwen3 q/k norms;
# Phi3 fused projections; Gemma embedding scale; Gemma2 sandwich norms; Gemma3 both; GPT-NeoX parallel
# residual; GPT-2; BertModel / RobertaModel with their pooler; T5 (ReLU, tied) and FLAN-T5 (gated, untied)
for c in mistral-7b:decoder:7241732096 llama-3.1-8b:decoder:8030261248 llama-2-13b:decoder:13015864320 \
         qwen2.5-0.5b:decoder:494032768 qwen2.5-1.5b:decoder:1543714304 qwen2.5-3b:decoder:3085938688 \
         qwen2.5-7b:decoder:7615616512 qwen3-0.6b:decoder:596049920 phi-3-mini:decoder:3821079552 \
         gemma-2b:decoder:2506172416 gemma-2-9b:decoder:9241705984 gemma-3-1b:decoder:999885952 \
         pythia-160m:decoder:162322944 gpt2:decoder:124439808 bert-base-uncased:encoder:109482240 \
         roberta-base:encoder:124645632 roberta-large:encoder:355359744 t5-small:t5:60506624 \
         flan-t5-base:t5:247577856 mixtral-8x7b:decoder:46702792704; do
    name=${c%%:*} rest=${c#*:}
    f=$D/$name.json
    out=$("$BIN" fit --hf-config "$f" --precision bf16 --seq-len 512 2>&1); rc=$?
    ok $(contains "$out" "$f: ${rest%%:*}, ${rest#*:} parameters (modelled") "$name: ${rest#*:} parameters"
    ok $(echo "$out" | grep -Eq '^   hf-config +[0-9]+ ' && echo 0 || echo 1) "$name: a batch answer (exit $rc)"
done
# the presets of the same models have the same counts
for p in mistral-7b llama-3.1-8b qwen2.5-7b gemma-2-9b phi-3-mini roberta-base; do
    cnt=$("$BIN" list presets | awk -v p=$p '$1 == p { print $3 }')
    ok $(contains "$("$BIN" fit --hf-config "$D/$p.json" --limit 1 2>&1)" " $cnt parameters") "preset $p: $cnt as its config"
done
# batch answers on sim:rtx5090 (modelled): bf16 AdamW full training of Qwen2.5-0.5B fits a batch, 7B models none
q=$("$BIN" fit --hf-config "$D/qwen2.5-0.5b.json" --precision bf16 | awk '$1 == "hf-config" { print $2 }')
ok $([ -n "$q" ] && [ "$q" -ge 1 ] && echo 0 || echo 1) "qwen2.5-0.5b: fits at batch $q"
"$BIN" fit --hf-config "$D/mistral-7b.json" --precision fp32 > "$T/m.txt" 2> "$T/m.err"; rc=$?
ok $([ $rc = 1 ] && echo 0 || echo 1) "mistral-7b in fp32 with AdamW fits at no batch: exit 1 (got $rc)"
ok $(contains "$(cat "$T/m.err")" "sliding_window is not modelled") "mistral-7b: sliding_window warned about"
# LoRA with 8-bit AdamW in bf16 at seq_len 512 fits gemma-2-9b; the batch shrinks with the sequence
g1=$("$BIN" fit --hf-config "$D/gemma-2-9b.json" --precision bf16 --trainable lora --optimizer adamw_8bit \
     --seq-len 256 2> /dev/null | tee "$T/g.out" | awk '$1 == "hf-config" { print $2 }')
g2=$("$BIN" fit --hf-config "$D/gemma-2-9b.json" --precision bf16 --trainable lora --optimizer adamw_8bit \
     --seq-len 1024 2> /dev/null | awk '$1 == "hf-config" { print $2 }')
ok $([ -n "$g1" ] && [ -n "$g2" ] && [ "$g1" -gt "$g2" ] && [ "$g2" -ge 1 ] && echo 0 || echo 1) \
    "gemma-2-9b LoRA bf16: batch $g1 at seq_len 256, $g2 at 1024"
ok $(contains "$(cat "$T/g.out")" "attn_logit_softcapping 50: applied by eager attention") "gemma2: attention soft-capping noted"
# gemma2's final logit soft-capping is modelled: three more logits-sized tensors than without it
sed 's/"final_logit_softcapping": 30.0/"final_logit_softcapping": null/' "$D/gemma-2-9b.json" > "$T/nocap.json"
prog() { "$BIN" run --hf-config "$1" --precision bf16 --trainable lora --batch-size 1 --seq-len 512 --csv - \
         2>/dev/null | awk -F, '$2 == "\"hf-config\"" { print $6 }'; }
a=$(prog "$D/gemma-2-9b.json"); b=$(prog "$T/nocap.json")
ok $([ -n "$a" ] && [ -n "$b" ] && [ "$a" != null ] && [ "$a" -gt "$b" ] && echo 0 || echo 1) \
    "final_logit_softcapping raises the peak ($a > $b)"

# what the generator builds for each family's additions, in the op program of a one-layer model
progof() { # CONFIG [MODEL-KEY]: the program of a one-layer, 16-token step of it
    cp "$1" "$T/p.json"
    printf 'name: p\ntitle: t\nsource: s\nmodel: { hf_config: p.json, layers: 1 %s }\njob: { batch_size: 1, seq_len: 16 }\nvariants:\n  before:\n    expect: { oom: false }\n' "${2:+, $2}" > "$T/p.yaml"
    "$BIN" program "$T/p.yaml" 2> /dev/null
}
p=$(progof "$D/gemma-2-9b.json")
ok $(echo "$p" | grep -q "^kernel scale .* f=59.866.* model.normalizer$" && echo 0 || echo 1) "gemma2: embeddings * sqrt(3584)"
ok $(echo "$p" | grep -q "param model.layers.0.post_feedforward_layernorm.weight$" && echo 0 || echo 1) "gemma2: post-feed-forward norm"
ok $(echo "$p" | grep -q "final_logit_softcapping.tanh$" && echo 0 || echo 1) "gemma2: the final logits' tanh"
ok $(echo "$p" | grep -q "^alloc t[0-9]* 14336 s0 param" && echo 0 || echo 1) "gemma2: fp32 weights, as its torch_dtype float32"
p=$(progof "$D/qwen3-0.6b.json")
ok $(echo "$p" | grep -q "param model.layers.0.self_attn.k_norm.weight$" && echo 0 || echo 1) "qwen3: k_norm"
ok $(echo "$p" | grep -q "^kernel rmsnorm_fwd .* model.layers.0.self_attn.q_norm$" && echo 0 || echo 1) "qwen3: q_norm runs"
p=$(progof "$D/t5-small.json")
ok $(echo "$p" | grep -q "param decoder.block.0.layer.2.DenseReluDense.wi.weight$" && echo 0 || echo 1) "t5: ReLU feed-forward's wi"
ok $(echo "$p" | grep -q "^kernel scale .* f=0.0441941.* lm_head$" && echo 0 || echo 1) "t5: tied head scales by d_model**-0.5"
progof "$D/gemma-2-9b.json" "attn: eager" | grep -c "^alloc .* model.layers.0.self_attn$" > "$T/cap.n"
sed 's/"attn_logit_softcapping": 50.0/"attn_logit_softcapping": null/' "$D/gemma-2-9b.json" > "$T/noattncap.json"
progof "$T/noattncap.json" "attn: eager" | grep -c "^alloc .* model.layers.0.self_attn$" > "$T/nocap.n"
ok $([ $(($(cat "$T/cap.n") - $(cat "$T/nocap.n"))) = 6 ] && echo 0 || echo 1) \
    "gemma2 eager: attn_logit_softcapping adds three score tensors in forward and three in backward"
sed 's/"use_parallel_residual": true/"use_parallel_residual": false/' "$D/pythia-160m.json" > "$T/seq.json"
ok $([ "$(progof "$D/pythia-160m.json" | md5sum)" != "$(progof "$T/seq.json" | md5sum)" ] && echo 0 || echo 1) \
    "gpt_neox: use_parallel_residual changes the program"

# Mixtral's sparse MoE block (models/moe.c), one layer of 3 experts, 16 tokens, top 2: 32 routed token
# slots, assumed balanced: 11, 11 and 10 tokens through each expert's w1, w3 and w2, index_add_'ed back
sed 's/"num_local_experts": 8/"num_local_experts": 3/' "$D/mixtral-8x7b.json" > "$T/moe3.json"
p=$(progof "$T/moe3.json")
for e in 0:11 1:11 2:10; do
    for w in w1:14336 w3:14336 w2:4096; do
        ok $(echo "$p" | grep -q "^kernel gemm bf16 M=${e#*:} N=${w#*:} .* model.layers.0.block_sparse_moe.experts.${e%%:*}.${w%%:*}$" \
             && echo 0 || echo 1) "mixtral: expert ${e%%:*}'s ${w%%:*} runs on its ${e#*:} tokens"
    done
done
ok $(echo "$p" | grep -q "^kernel gemm bf16 M=16 N=3 K=4096 .* model.layers.0.block_sparse_moe.gate$" && echo 0 || echo 1) \
    "mixtral: the router gate runs on every token"
ok $(echo "$p" | grep -q "^kernel softmax_fwd fp32 rows=16 cols=3 .* model.layers.0.block_sparse_moe.softmax$" && echo 0 || echo 1) \
    "mixtral: routing softmax in fp32"
ok $(echo "$p" | grep -q "^kernel softmax_bwd fp32 rows=16 cols=3 .* model.layers.0.block_sparse_moe.softmax$" && echo 0 || echo 1) \
    "mixtral: the router trains (softmax backward)"
adds=$(echo "$p" | grep -c "^kernel copy_blocks .* accumulate=1 .* model.layers.0.block_sparse_moe.index_add_$")
ok $([ "$adds" = 3 ] && echo 0 || echo 1) "mixtral: one index_add_ per expert hit (got $adds)"
ok $(echo "$p" | grep "block_sparse_moe.experts.0.w[123].weight$" | grep "param" | awk '{ print $NF }' | tr '\n' ' ' | \
     grep -q "experts.0.w1.weight .*experts.0.w2.weight .*experts.0.w3.weight" && echo 0 || echo 1) \
    "mixtral: w1, w2, w3 registered in MixtralBlockSparseTop2MLP's order"
# a batch answer for LoRA on an H200, with the routing assumption printed
out=$("$BIN" fit --hf-config "$D/mixtral-8x7b.json" --precision bf16 --trainable lora --seq-len 512 --device sim:h200 2>&1)
b=$(echo "$out" | awk '$1 == "hf-config" { print $2 }')
ok $([ -n "$b" ] && [ "$b" -ge 1 ] && echo 0 || echo 1) "mixtral-8x7b LoRA bf16 on sim:h200: fits at batch $b"
ok $(contains "$(echo "$out" | tr -s ' \n' '  ')" "MoE routing assumed balanced (tokens x 2 / 8 experts each,") \
    "mixtral: the balanced routing is among the printed assumptions"
# the JSON report names the routing assumed for a MoE model, and only for one
printf 'name: p\ntitle: t\nsource: s\nmodel: { hf_config: moe3.json, layers: 1, hidden: 64, heads: 4, kv_heads: 2, ffn: 128, vocab: 100 }\njob: { batch_size: 1, seq_len: 16 }\nvariants:\n  before:\n    expect: { oom: false }\n' > "$T/moe.yaml"
"$BIN" run --json "$T/moe.json" "$T/moe.yaml" > /dev/null 2>&1
ok $(grep -q '"routing": *"MoE routing assumed balanced (tokens x 2 / 3 experts each' "$T/moe.json" && echo 0 || echo 1) \
    "mixtral: assumptions.routing in the JSON report"
"$BIN" run --json "$T/dense.json" --hf-config "$D/qwen2.5-0.5b.json" --batch-size 1 --seq-len 16 > /dev/null 2>&1
ok $(grep -q '"kernel_scratch"' "$T/dense.json" && ! grep -q '"routing"' "$T/dense.json" && echo 0 || echo 1) \
    "a dense model's JSON assumptions have no routing key"
sed 's/"output_router_logits": false/"output_router_logits": true/' "$D/mixtral-8x7b.json" > "$T/aux.json"
ok $(contains "$("$BIN" fit --hf-config "$T/aux.json" --limit 1 2>&1)" "output_router_logits true is not modelled") \
    "mixtral: output_router_logits true warned about"

# the job options and the assumptions printed
out=$("$BIN" run --hf-config "$D/qwen2.5-0.5b.json" --batch-size 2 --seq-len 64 2>&1); rc=$?
ok $rc "run --hf-config runs the one-line job (exit $rc)"
ok $(contains "$out" "job: batch 2, seq_len 64, bf16, adamw, full") "run: the job it ran"
ok $(contains "$out" "assumed: weights loaded and trained in torch_dtype bf16") "run: torch_dtype is the default precision"
ok $(contains "$out" "assumed: attention sdpa (flash); act silu (fused); pure bf16") "run: pure bf16 ran"
out=$("$BIN" run --hf-config "$D/qwen2.5-0.5b.json" --batch-size 2 --precision bf16-mixed --optimizer sgd 2>&1)
ok $(contains "$out" "autocast bf16 over fp32 weights; sgd") "--precision bf16-mixed --optimizer sgd: autocast over fp32"
out=$("$BIN" run --hf-config "$D/qwen2.5-0.5b.json" --batch-size 2 --precision fp16-mixed 2>&1)
ok $(contains "$out" "autocast fp16 over fp32 weights, loss scaling") "--precision fp16-mixed: loss scaling"
out=$("$BIN" run --hf-config "$D/t5-small.json" --batch-size 2 2>&1)
ok $(contains "$out" "assumed: fp32 weights (the config names no torch_dtype)") "t5-small: no torch_dtype, fp32"
optbad() { # EXPECTED-MESSAGE ARGS...
    m=$1; shift
    "$BIN" "$@" > "$T/o.out" 2> "$T/o.err"; rc=$?
    ok $([ $rc = 2 ] && [ ! -s "$T/o.out" ] && echo 0 || echo 1) "$* : exit 2 (got $rc), nothing on stdout"
    ok $(contains "$(cat "$T/o.err")" "$m") "$* : says '$m' $(head -c 200 "$T/o.err")"
}
optbad "--precision 'int4': one of fp32, bf16, fp16, bf16-mixed, fp16-mixed" fit --hf-config "$D/gpt2.json" --precision int4
optbad "--optimizer 'lion': one of sgd, adamw" run --hf-config "$D/gpt2.json" --optimizer lion
optbad "--trainable 'half': one of full, lora" fit --hf-config "$D/gpt2.json" --trainable half
optbad "--batch-size '0': a whole number from 1" run --hf-config "$D/gpt2.json" --batch-size 0
optbad "--seq-len goes with --hf-config" run --seq-len 64 scenarios/vit_lora_linear_probe.yaml
optbad "seq_len 2048 exceeds the model's 1024 learned positions" fit --hf-config "$D/gpt2.json" --seq-len 2048

# bad configs: exit 2, the field named, nothing printed on stdout
bad() { # NAME SED-EXPR MESSAGE
    sed "$2" "$D/llama-3.1-8b.json" > "$T/$1.json"
    "$BIN" fit --hf-config "$T/$1.json" > "$T/$1.out" 2> "$T/$1.err"; rc=$?
    ok $([ $rc = 2 ] && [ ! -s "$T/$1.out" ] && echo 0 || echo 1) "$1: exit 2 (got $rc), nothing on stdout"
    ok $(contains "$(cat "$T/$1.err")" "$3") "$1: says '$3' $(head -c 200 "$T/$1.err")"
}
bad unknown-type 's/"model_type": "llama"/"model_type": "falcon"/' \
    "model_type 'falcon' is not supported (llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, gemma3_text, gpt_neox, gpt2, bert, roberta, t5, mixtral, vit, clip, clip_vision_model)"
bad experts 's/"vocab_size"/"num_local_experts": 8, "vocab_size"/' "num_local_experts is not modelled for model_type llama"
bad no-hidden '/"hidden_size"/d' "missing required field 'hidden_size'"
bad wrong-type 's/"num_hidden_layers": 32/"num_hidden_layers": "32"/' "field 'num_hidden_layers' must be a whole number"
bad act 's/"hidden_act": "silu"/"hidden_act": "xielu"/' "hidden_act 'xielu' is not modelled"
bad dtype 's/"torch_dtype": "bfloat16"/"torch_dtype": "float8_e4m3fn"/' "torch_dtype 'float8_e4m3fn' is not modelled"
bad rope 's/"vocab_size"/"rope_scaling": 8, "vocab_size"/' "field 'rope_scaling' must be an object or null"
bad mlp-bias 's/"vocab_size"/"mlp_bias": true, "vocab_size"/' "mlp_bias true is not modelled"
bad bad-tie 's/"tie_word_embeddings": false/"tie_word_embeddings": 0/' "field 'tie_word_embeddings' must be true or false"
bad kv-heads 's/"num_key_value_heads": 8/"num_key_value_heads": 5/' "num_attention_heads 32 is not a multiple of num_key_value_heads 5"
bad not-object '1!d;s/.*/[1]/' "expected a JSON object"
# other families' own fields
badf() { # NAME FILE SED-EXPR MESSAGE
    sed "$3" "$D/$2.json" > "$T/$1.json"
    "$BIN" fit --hf-config "$T/$1.json" > "$T/$1.out" 2> "$T/$1.err"; rc=$?
    ok $([ $rc = 2 ] && [ ! -s "$T/$1.out" ] && echo 0 || echo 1) "$1: exit 2 (got $rc), nothing on stdout"
    ok $(contains "$(cat "$T/$1.err")" "$4") "$1: says '$4' $(head -c 200 "$T/$1.err")"
}
badf moe-topk mixtral-8x7b 's/"num_experts_per_tok": 2/"num_experts_per_tok": 9/' "num_experts_per_tok 9 exceeds num_local_experts 8"
badf moe-no-k mixtral-8x7b '/"num_experts_per_tok"/d' "missing required field 'num_experts_per_tok'"
badf moe-jitter mixtral-8x7b 's/"rms_norm_eps"/"router_jitter_noise": 0.01, "rms_norm_eps"/' "router_jitter_noise 0.01 is not modelled"
badf t5-proj t5-small 's/"d_ff": 2048/"d_ff": 2048, "feed_forward_proj": "gated-mish"/' "feed_forward_proj 'gated-mish' is not modelled"
badf t5-no-dff t5-small '/"d_ff"/d' "missing required field 'd_ff'"
badf bert-pos bert-base-uncased 's/"absolute"/"relative_key"/' "position_embedding_type 'relative_key' is not modelled"
badf gpt2-upcast gpt2 's/"n_ctx"/"reorder_and_upcast_attn": true, "n_ctx"/' "reorder_and_upcast_attn true is not modelled"
badf gpt2-no-embd gpt2 '/"n_embd"/d' "missing required field 'n_embd'"
badf phi3-drop phi-3-mini 's/"resid_pdrop": 0.0/"resid_pdrop": 0.1/' "resid_pdrop 0.1 is not modelled"
badf neox-drop pythia-160m 's/"hidden_size"/"hidden_dropout": 0.1, "hidden_size"/' "hidden_dropout 0.1 is not modelled"
badf gemma2-cap gemma-2-9b 's/"final_logit_softcapping": 30.0/"final_logit_softcapping": "30"/' "field 'final_logit_softcapping' must be a number"
"$BIN" fit --hf-config "$T/missing.json" > /dev/null 2> "$T/x.err"; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "a missing file exits 2 (got $rc)"
"$BIN" fit --hf-config "$D/qwen2.5-0.5b.json" scenarios/vit_lora_linear_probe.yaml > /dev/null 2>&1; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "--hf-config with a scenario file too: exit 2 (got $rc)"
"$BIN" fit --help | awk 'length > 100 { bad = 1 } END { exit bad }'
ok $? "fit --help fits in 100 columns"
ok $(contains "$("$BIN" fit --help)" "--hf-config FILE") "fit --help names --hf-config"
"$BIN" run --help | awk 'length > 100 { bad = 1 } END { exit bad }'
ok $? "run --help fits in 100 columns"
ok $(contains "$("$BIN" run --help)" "--precision P") "run --help names --precision"

# the scenario key: model.hf_config, relative to the scenario file, other model keys overriding it
cp "$D/qwen2.5-0.5b.json" "$T/qwen.json"
scen() { # MODEL-MAPPING [JOB-KEY]
    printf 'name: hf\ntitle: t\nsource: s\nmodel: %s\njob: { batch_size: 4, seq_len: 128 %s }\nvariants:\n  before:\n    expect: { oom: false }\n' "$1" "${2:+, $2}" > "$T/s.yaml"
    "$BIN" run "$T/s.yaml" > "$T/s.out" 2> "$T/s.err"
}
scen '{ hf_config: qwen.json, attn: eager }'; rc=$?
ok $rc "model: { hf_config: qwen.json } runs and fits (exit $rc) $(head -c 200 "$T/s.err")"
ok $(contains "$(cat "$T/s.out")" "assumed: attention eager") "a model key beside hf_config overrides it"
ok $(contains "$(cat "$T/s.out")" "pure bf16") "the config's torch_dtype is the job's load and param dtype"
scen '{ hf_config: qwen.json }' "load_dtype: fp32"; rc=$?
ok $(contains "$(cat "$T/s.out")" "; fp32; adamw") "a job's load_dtype beside hf_config overrides torch_dtype (exit $rc)"
scen '{ hf_config: qwen.json, preset: llama-3-8b }'; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "hf_config with a preset: exit 2 (got $rc)"
ok $(contains "$(cat "$T/s.err")" "model.hf_config cannot be combined") "and says why"
scen '{ hf_config: nope.json }'; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "hf_config naming no file: exit 2 (got $rc)"
ok $(contains "$(cat "$T/s.err")" "s.yaml:4:10: model.hf_config: unable to open") "and names the key $(cat "$T/s.err")"

# sequence classification by architectures (encoder.c's head): BertForSequenceClassification 109,483,778
# and RobertaForSequenceClassification 124,647,170 with two labels; three from id2label; one refused
seqcls() { # NAME CONFIG SED-EXPR COUNT
    sed "$3" "$D/$2.json" > "$T/$1.json"
    out=$("$BIN" fit --hf-config "$T/$1.json" --batch-size 2 2>&1)
    ok $(contains "$out" "encoder, $4 parameters") "$1: $4 parameters $(echo "$out" | head -c 160)"
}
seqcls bert-sc bert-base-uncased 's/"BertForMaskedLM"/"BertForSequenceClassification"/' 109483778
seqcls roberta-sc roberta-base 's/"RobertaForMaskedLM"/"RobertaForSequenceClassification"/' 124647170
seqcls roberta-sc3 roberta-base 's/"RobertaForMaskedLM"/"RobertaForSequenceClassification"], "id2label": {"0": "neg", "1": "neu", "2": "pos"}, "x": [0/' $((124647170 + 769))
sed 's/"RobertaForMaskedLM"/"RobertaForSequenceClassification"], "num_labels": 1, "x": [0/' "$D/roberta-base.json" > "$T/reg.json"
"$BIN" fit --hf-config "$T/reg.json" > "$T/reg.out" 2> "$T/reg.err"; rc=$?
ok $([ $rc = 2 ] && [ ! -s "$T/reg.out" ] && echo 0 || echo 1) "num_labels 1: exit 2 (got $rc)"
ok $(contains "$(cat "$T/reg.err")" "num_labels 1 is regression (MSELoss), not modelled") "and says why $(cat "$T/reg.err")"
done_testing
