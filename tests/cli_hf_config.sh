#!/bin/sh
# cli_hf_config.sh: `oomlab fit --hf-config`: the shipped Hugging Face configs (written from the
# published config.json of each model) build their exact published parameter counts and get a batch
# answer; bad configs exit 2 naming the field, with no table printed.
BIN=${OOMLAB_BIN:-build/oomlab}
D=$(dirname "$0")/data/hf
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

# exact counts: Mistral-7B-v0.1 and Llama-3.1-8B untied with GQA; Qwen2.5-0.5B tied, q/k/v biases only
for c in mistral-7b:7241732096 llama-3.1-8b:8030261248 qwen2.5-0.5b:494032768; do
    f=$D/${c%%:*}.json
    out=$("$BIN" fit --hf-config "$f" 2>&1); rc=$?
    ok $(contains "$out" "$f: decoder, ${c#*:} parameters (modelled") "${c%%:*}: ${c#*:} parameters"
    ok $(echo "$out" | grep -Eq '^   hf-config +[0-9]+ ' && echo 0 || echo 1) "${c%%:*}: a batch answer (exit $rc)"
done
# fp32 AdamW full training: Qwen2.5-0.5B fits at some batch on the RTX 5090, Mistral-7B at none
q=$("$BIN" fit --hf-config "$D/qwen2.5-0.5b.json" | awk '$1 == "hf-config" { print $2 }')
ok $([ -n "$q" ] && [ "$q" -ge 1 ] && echo 0 || echo 1) "qwen2.5-0.5b: fits at batch $q"
"$BIN" fit --hf-config "$D/mistral-7b.json" > "$T/m.txt" 2> "$T/m.err"; rc=$?
ok $([ $rc = 1 ] && echo 0 || echo 1) "mistral-7b in fp32 with AdamW fits at no batch: exit 1 (got $rc)"
ok $(contains "$(cat "$T/m.err")" "sliding_window is not modelled") "mistral-7b: sliding_window warned about"

# bad configs: exit 2, the field named, nothing printed on stdout
bad() { # NAME SED-EXPR MESSAGE
    sed "$2" "$D/llama-3.1-8b.json" > "$T/$1.json"
    "$BIN" fit --hf-config "$T/$1.json" > "$T/$1.out" 2> "$T/$1.err"; rc=$?
    ok $([ $rc = 2 ] && [ ! -s "$T/$1.out" ] && echo 0 || echo 1) "$1: exit 2 (got $rc), nothing on stdout"
    ok $(contains "$(cat "$T/$1.err")" "$3") "$1: says '$3' $(head -c 200 "$T/$1.err")"
}
bad unknown-type 's/"model_type": "llama"/"model_type": "falcon"/' "model_type 'falcon' is not supported"
bad no-hidden '/"hidden_size"/d' "missing required field 'hidden_size'"
bad wrong-type 's/"num_hidden_layers": 32/"num_hidden_layers": "32"/' "field 'num_hidden_layers' must be a whole number"
bad act 's/"hidden_act": "silu"/"hidden_act": "xielu"/' "hidden_act 'xielu' is not modelled"
bad bad-tie 's/"tie_word_embeddings": false/"tie_word_embeddings": 0/' "field 'tie_word_embeddings' must be true or false"
bad kv-heads 's/"num_key_value_heads": 8/"num_key_value_heads": 5/' "num_attention_heads 32 is not a multiple of num_key_value_heads 5"
bad not-object '1!d;s/.*/[1]/' "expected a JSON object"
"$BIN" fit --hf-config "$T/missing.json" > /dev/null 2> "$T/x.err"; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "a missing file exits 2 (got $rc)"
"$BIN" fit --hf-config "$D/qwen2.5-0.5b.json" scenarios/vit_lora_linear_probe.yaml > /dev/null 2>&1; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "--hf-config with a scenario file too: exit 2 (got $rc)"
"$BIN" fit --help | awk 'length > 100 { bad = 1 } END { exit bad }'
ok $? "fit --help fits in 100 columns"
ok $(contains "$("$BIN" fit --help)" "--hf-config FILE") "fit --help names --hf-config"

# the scenario key: model.hf_config, relative to the scenario file, other model keys overriding it
cp "$D/qwen2.5-0.5b.json" "$T/qwen.json"
scen() { # MODEL-MAPPING
    printf 'name: hf\ntitle: t\nsource: s\nmodel: %s\njob: { batch_size: 4, seq_len: 128 }\nvariants:\n  before:\n    expect: { oom: false }\n' "$1" > "$T/s.yaml"
    "$BIN" run "$T/s.yaml" > "$T/s.out" 2> "$T/s.err"
}
scen '{ hf_config: qwen.json, attn: eager }'; rc=$?
ok $rc "model: { hf_config: qwen.json } runs and fits (exit $rc) $(head -c 200 "$T/s.err")"
ok $(contains "$(cat "$T/s.out")" "assumed: attention eager") "a model key beside hf_config overrides it"
scen '{ hf_config: qwen.json, preset: llama-3-8b }'; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "hf_config with a preset: exit 2 (got $rc)"
ok $(contains "$(cat "$T/s.err")" "model.hf_config cannot be combined") "and says why"
scen '{ hf_config: nope.json }'; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "hf_config naming no file: exit 2 (got $rc)"
ok $(contains "$(cat "$T/s.err")" "s.yaml:4:10: model.hf_config: unable to open") "and names the key $(cat "$T/s.err")"
done_testing
