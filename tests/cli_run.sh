#!/bin/sh
# cli_run.sh: `oomlab run` end to end: every scenario in scenarios/ runs on the simulated RTX 5090 with
# every expectation holding, the output equals the committed baselines in results/ byte for byte (sim
# is deterministic), --tap and exit codes behave, and bad scenario files fail with file:line:col,
# exit code 2 and no result files.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

"$BIN" run --json "$T/run.json" --csv "$T/run.csv" scenarios/ > "$T/run.txt" 2> "$T/err.txt"
rc=$?
ok $rc "oomlab run scenarios/: every expectation holds (exit $rc) $(head -c 300 "$T/err.txt")"
for f in run.txt run.json run.csv; do
    if cmp -s "results/$f" "$T/$f"; then ok 0 "results/$f equals a fresh run"; else
        ok 1 "results/$f equals a fresh run"
        diff "results/$f" "$T/$f" | head -20 | sed 's/^/# /'
    fi
done
ok $(contains "$(cat "$T/run.txt")" "modelled") "figures are labelled modelled"

tap=$("$BIN" run --tap scenarios/)
ok $? "--tap exits 0"
ok $(echo "$tap" | grep -c '^not ok' | grep -qx 0 && echo 0 || echo 1) "--tap: no failing expectation"
ok $(echo "$tap" | tail -1 | grep -q '^1\.\.[1-9]' && echo 0 || echo 1) "--tap: plan line at the end"

# an expectation that fails: exit 1, reported
sed 's/expect: { oom: true/expect: { oom: false/' scenarios/duplicate_dtype_conversion.yaml > "$T/wrong.yaml"
out=$("$BIN" run "$T/wrong.yaml" 2>&1); rc=$?
ok $([ $rc = 1 ] && echo 0 || echo 1) "a failed expectation exits 1 (got $rc)"
ok $(contains "$out" "expectation failed: expected it to fit, but it OOMs") "and says what differed"

# oomlab fit: the ViT's full fine-tune OOMs at its batch of 128, so its largest batch is below that;
# LoRA trains far fewer weights, so more fits; a linear probe fits the search limit
fit=$("$BIN" fit --limit 256 scenarios/vit_lora_linear_probe.yaml 2>&1); rc=$?
ok $rc "oomlab fit exits 0"
largest() { echo "$fit" | awk -v v="$1" '$1 == v { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+\+?$/) { sub(/\+/, "", $i); print $i; exit } }'; }
b=$(largest before); l=$(largest after-lora); p=$(largest after-linear-probe)
ok $([ -n "$b" ] && [ "$b" -ge 1 ] && [ "$b" -lt 128 ] && echo 0 || echo 1) "fit: full fine-tune's largest batch ($b) is below the 128 that OOMs"
ok $([ -n "$l" ] && [ "$l" -gt "$b" ] && echo 0 || echo 1) "fit: LoRA fits a larger batch ($l > $b)"
ok $(contains "$fit" "256+") "fit: the linear probe reaches the search limit ($p)"
ok $(echo "$fit" | grep -q '^   before .* [0-9.]* (modelled) ' && echo 0 || echo 1) "fit: samples/s at the largest batch, marked modelled"
# --margin 10%: the reserved peak leaves 10% of the T4's 14.75 GiB free (<= 13.27 GiB), so less fits
fit=$("$BIN" fit --limit 256 --margin 10% scenarios/vit_lora_linear_probe.yaml 2>&1); rc=$?
ok $rc "oomlab fit --margin exits 0"
bm=$(largest before)
resv=$(echo "$fit" | awk '$1 == "before" { for (i = 2; i < NF; i++) if ($(i + 1) == "GiB") { print $i; exit } }')
ok $([ -n "$bm" ] && [ "$bm" -ge 1 ] && [ "$bm" -lt "$b" ] && echo 0 || echo 1) "fit --margin 10%: a smaller batch ($bm < $b)"
ok $(awk -v r="$resv" 'BEGIN { exit !(r != "" && r <= 13.27) }' && echo 0 || echo 1) "fit --margin 10%: its reserved peak $resv GiB leaves 10% free"
# --capacity 50%: half the T4 (its CUDA context kept) fits a smaller batch still
fit=$("$BIN" fit --limit 256 --capacity 50% scenarios/vit_lora_linear_probe.yaml 2>&1); rc=$?
ok $rc "oomlab fit --capacity 50% exits 0"
bh=$(largest before)
ok $([ -n "$bh" ] && [ "$bh" -ge 1 ] && [ "$bh" -lt "$bm" ] && echo 0 || echo 1) "fit --capacity 50%: a smaller batch ($bh < $bm)"
ok $(contains "$fit" "modelled on sim:t4@50% with capacity 50%") "fit names the device and the capacity it ran under"
# --param world_size: Llama-3-8B under FSDP needs 4 RTX 5090s (3 OOM: probes 1, 2, 4, then 3 and 4 again)
fit=$("$BIN" fit --param world_size --json "$T/ws.json" scenarios/fsdp_too_few_ranks.yaml 2>&1); rc=$?
ok $rc "oomlab fit --param world_size exits 0"
ok $(contains "$fit" "smallest world_size that fits") "and says it searched for the smallest"
ok $([ "$(largest before)" = 4 ] && echo 0 || echo 1) "FSDP Llama-3-8B: 4 ranks ($(largest before))"
ok $(grep -q '"smallest": 4' "$T/ws.json" && echo 0 || echo 1) "the JSON names it smallest"
# --param tensor_parallel: Llama-3-8B at 8k tokens needs 8 tensor-parallel ranks, 4 with sequence parallelism
fit=$("$BIN" fit --param tensor_parallel --json "$T/tp.json" scenarios/tensor_parallel_activations.yaml 2>&1); rc=$?
ok $rc "oomlab fit --param tensor_parallel exits 0"
ok $([ "$(largest before)" = 8 ] && [ "$(largest after-tp-4-sequence-parallel)" = 4 ] && echo 0 || echo 1) \
    "TP alone: 8 ranks ($(largest before)); with sequence parallelism: 4 ($(largest after-tp-4-sequence-parallel))"
ok $(grep -q '"smallest": 8' "$T/tp.json" && echo 0 || echo 1) "the JSON names the smallest degree"
# --param world_size with tensor_parallel 2: multiples of 2 (FSDP over world_size / 2 data-parallel ranks)
sed 's/world_size: 2 }/world_size: 2, tensor_parallel: 2 }/; /after-/,$d' scenarios/fsdp_too_few_ranks.yaml > "$T/tp_fsdp.yaml"
fit=$("$BIN" fit --param world_size "$T/tp_fsdp.yaml" 2>&1); rc=$?
ok $([ $rc = 0 ] && [ "$(largest before)" = 4 ] && echo 0 || echo 1) "TP 2 x FSDP: 4 ranks in all ($(largest before))"
out=$("$BIN" fit --param world_size scenarios/activation_growth.yaml 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "fit --param world_size of a job without job.parallel exits 2"
ok $(contains "$out" "--param world_size: variant before has no job.parallel.strategy") "and says why ($out)"
"$BIN" fit --margin 100 scenarios/vit_lora_linear_probe.yaml > /dev/null 2>&1
ok $([ $? = 2 ] && echo 0 || echo 1) "fit --margin 100 is refused (exit 2)"

# bad input: file:line:col, exit 2, no result file
printf 'name: x\ntitle: t\nsource: s\nmodel: { preset: gpt2 }\njob: { bach_size: 8 }\nvariants:\n  before: { expect: { oom: false } }\n' > "$T/bad.yaml"
out=$("$BIN" run --json "$T/bad.json" --csv "$T/bad.csv" "$T/bad.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "bad scenario exits 2 (got $rc)"
ok $(contains "$out" "bad.yaml:5:8: unknown key 'bach_size' in job (did you mean 'batch_size'?)") "message names file:line:col ($out)"
ok $([ ! -e "$T/bad.json" ] && [ ! -e "$T/bad.csv" ] && echo 0 || echo 1) "no result file left behind"
out=$("$BIN" run "$T/missing.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "missing scenario exits 2"
out=$("$BIN" run --device sim:gtx480 scenarios/ 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "unknown device profile exits 2 ($out)"

# bounded work: a job of 2^20 steps x 2^20 micro-batches is refused, naming the flag that allows it
sed 's/^  grad_accum: 2$/  grad_accum: 1048576/; s/^  steps: 3$/  steps: 1048576/' scenarios/unreleased_gradients.yaml > "$T/huge.yaml"
out=$("$BIN" run "$T/huge.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "a job of 2^40 forward passes is refused: exit 2 (got $rc)"
ok $(contains "$out" "more than the 100000 oomlab runs without --max-forwards; give --max-forwards 1099511627776") "and says which flag runs it ($out)"
"$BIN" run --max-forwards 0 scenarios/unreleased_gradients.yaml > /dev/null 2>&1
ok $([ $? = 2 ] && echo 0 || echo 1) "--max-forwards 0 is refused"
"$BIN" fit --limit 5x scenarios/vit_lora_linear_probe.yaml > /dev/null 2>&1
ok $([ $? = 2 ] && echo 0 || echo 1) "fit --limit 5x is refused, not read as 5"
"$BIN" fit --limit 2000000 scenarios/vit_lora_linear_probe.yaml > /dev/null 2>&1
ok $([ $? = 2 ] && echo 0 || echo 1) "fit --limit above 2^20 is refused"
fit=$("$BIN" fit --limit 100 scenarios/vit_lora_linear_probe.yaml 2>&1)
ok $(contains "$fit" " 100+") "fit probes the limit itself, not only powers of two"
# progress on a terminal (forced here), nothing in a pipe; write errors on stdout are errors
err=$(OOMLAB_PROGRESS=1 "$BIN" run scenarios/unreleased_gradients.yaml 2>&1 > /dev/null)
ok $(contains "$err" "forecaster-backward-oom/before: ") "progress names the job on stderr"
err=$("$BIN" run scenarios/unreleased_gradients.yaml 2>&1 > /dev/null)
ok $([ -z "$err" ] && echo 0 || echo 1) "no progress when stderr is not a terminal"
if [ -w /dev/full ]; then
    out=$("$BIN" run scenarios/unreleased_gradients.yaml 2>&1 > /dev/full); rc=$?
    ok $([ $rc = 3 ] && echo 0 || echo 1) "a full standard output is an error: exit 3 (got $rc)"
    ok $(contains "$out" "cannot write to standard output: No space left on device") "and says why"
fi
done_testing
