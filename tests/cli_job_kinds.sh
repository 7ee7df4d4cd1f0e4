#!/bin/sh
# cli_job_kinds.sh: job.kind through `oomlab run`: a generate and an eval scenario run with their phases,
# and bad input (an unbuilt kind, an unknown cache, a static cache too short, a model generate does not
# walk, a generation beyond the work bound); a GPT-2 generation runs exits 2 naming the key, with no result file left behind.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

LLAMA='{ family: decoder, layers: 2, hidden: 64, heads: 4, kv_heads: 2, ffn: 128, vocab: 256, norm: rmsnorm, ffn_kind: gated, act: silu, pos: rotary, causal: true, lm_head: true }'
gen() { # $1: the job's extra lines, $2: the model (default: a small Llama-style one)
    printf 'name: g\ntitle: t\nsource: s\nmodel: %s\njob:\n  kind: generate\n  batch_size: 2\n%s\nvariants:\n  before: { expect: { oom: false } }\n' \
        "${2:-$LLAMA}" "$1" > "$T/g.yaml"
}

gen '  generate: { prompt_len: 16, new_tokens: 4, do_sample: true }'
out=$("$BIN" run --json "$T/g.json" "$T/g.yaml" 2>&1); rc=$?
ok $rc "a small generate scenario runs (exit $rc)"
ok $(contains "$out" "generate: prefill") "its throughput names prefill and decode"
ok $(contains "$(cat "$T/g.json")" '"decode"') "its JSON has the decode phase's peak"

bad() { # $1: description, $2: expected text
    out=$("$BIN" run --json "$T/bad.json" --csv "$T/bad.csv" "$T/g.yaml" 2>&1); rc=$?
    ok $([ $rc = 2 ] && echo 0 || echo 1) "$1: exit 2 (got $rc)"
    ok $(contains "$out" "$2") "$1: says so ($out)"
    ok $([ ! -e "$T/bad.json" ] && [ ! -e "$T/bad.csv" ] && echo 0 || echo 1) "$1: no result file left behind"
}
gen '  generate: { prompt_len: 16, new_tokens: 4, cache: paged }'
bad "an unknown cache" "g.yaml:8:53: job.generate.cache must be dynamic or static, got 'paged'"
gen '  generate: { prompt_len: 16, new_tokens: 4, cache: static, max_cache_len: 8 }'
bad "a static cache shorter than the generation" "job.generate.max_cache_len: 8 cannot hold prompt_len + new_tokens = 20"
gen '  generate: { prompt_len: 16, new_tokens: 4 }' '{ preset: flan-t5-base }'
bad "a T5 model" "job.kind generate: built for decoder models with rotary positions (Llama, Mistral, Qwen2) or learned ones (GPT-2); this model is t5"
gen '  generate: { prompt_len: 16, new_tokens: 200000 }'
bad "200,000 new tokens" "generate: steps x new_tokens"
gen '  generate: { prompt_len: 16, new_tokens: 4 }' '{ preset: gpt2, layers: 2 }'
out=$("$BIN" run "$T/g.yaml" 2>&1); rc=$?
ok $rc "a GPT-2 generation runs (exit $rc)"
sed 's/kind: generate/kind: diffusion/' "$T/g.yaml" > "$T/d.yaml" && mv "$T/d.yaml" "$T/g.yaml"
bad "job.kind diffusion on a decoder" "job.kind diffusion runs a UNet2DConditionModel"
sed 's/kind: diffusion/kind: sample/' "$T/g.yaml" > "$T/d.yaml" && mv "$T/d.yaml" "$T/g.yaml"
bad "an unknown job.kind" "job.kind"

printf 'name: e\ntitle: t\nsource: s\nmodel: { preset: tiny-transformer }\njob: { kind: eval, eval: { every: 2 } }\nvariants:\n  before: { expect: { oom: false } }\n' > "$T/g.yaml"
bad "eval cadence in an eval job" "job.eval.every and job.eval.before_training"
done_testing
