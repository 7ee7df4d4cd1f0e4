#!/bin/sh
# cli_robust.sh: job.robust, an OOM-robust training script run step by step. On a 1.5 GiB card a tiny
# transformer at batch 64 x 256 tokens OOMs, at 32 x 2 OOMs again, and settles at 16 x 4 (the effective
# batch kept), the model staying in place across retries (34 MiB reserved after each recovery); the
# table and the JSON give every attempt, the work thrown away and what fit finds up front; without
# keep_effective_batch the micro-batches stay 1; min_batch_size and max_retries stop it; a fallback
# device takes over; on the host it runs the retries' kernels for real; sim runs are byte for byte
# the same; bad settings exit 2 naming file, line and key.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

# scenario DEVICE ROBUST [EXPECT-OOM] [JOB-EXTRA]
scenario() {
    printf 'name: r\ntitle: t\nsource: tests\ndevice: %s\nmodel: { preset: tiny-transformer }\njob: { batch_size: 64, seq_len: 256, steps: 2%s, robust: { %s } }\nvariants:\n  before: { expect: { oom: %s } }\n' \
        "$1" "${4:-}" "$2" "${3:-false}" > "$T/s.yaml"
}
# js EXPR: a field of the only job's robust object
js() { python3 -c "import json,sys; r=json.load(open('$T/r.json'))['groups'][0]['jobs'][0]['robust']; print($1)"; }
have_python=$(command -v python3 >/dev/null && echo 1 || echo 0)
# attempts: "BATCHxACCUM:oom|ok ..." from the table
attempts() { awk '/^     batch [0-9]+ x [0-9]+ on / { printf "%s%sx%s:%s", sep, $2, $4, ($7 == "OOM" ? "oom" : "ok"); sep = " " }' "$T/out.txt"; }

scenario sim:1.5GiB "on_oom: halve_batch"
"$BIN" run --json "$T/r.json" "$T/s.yaml" > "$T/out.txt" 2>&1; rc=$?
ok $rc "halve_batch on a 1.5 GiB card: the job settles, so expect oom: false holds (exit 0)"
ok $([ "$(attempts)" = "64x1:oom 32x2:oom 16x4:ok" ] && echo 0 || echo 1) "64 x 1 OOMs, 32 x 2 OOMs, 16 x 4 runs to the end ($(attempts))"
ok $(contains "$(cat "$T/out.txt")" "batch 64 x 1 on sim:1.5GiB: OOM in forward, step 1 (transformer.h.3.attn.resid_dropout); 0 finished steps") "the first attempt's OOM: phase, step and module"
ok $(contains "$(cat "$T/out.txt")" "the recovery freed 1.05 GiB, 34.00 MiB reserved after empty_cache") "its recovery frees the failed step and keeps the model (34 MiB reserved)"
ok $(contains "$(cat "$T/out.txt")" "settled at batch 16 x 4 after 2 OOMs (0 steps, 0.00621 s of kernels thrown away); oomlab fit, up front: batch 19 fits a fresh process on sim:1.5GiB") "where it settled, the work thrown away, and fit's answer beside it"
ok $(contains "$(cat "$T/out.txt")" "on OOM, halve the batch and retry (job.robust; kernel time modelled)") "the kernel time says it is modelled"
if [ "$have_python" = 1 ]; then
    ok $([ "$(js "r['settled'], r['batch_size'], r['grad_accum'], len(r['attempts']), r['fit_batch_size']")" = "True 16 4 3 19" ] && echo 0 || echo 1) "JSON: settled at 16 x 4 after 3 attempts, fit 19"
    ok $([ "$(js "[a['samples'] for a in r['attempts']]")" = "[64, 64, 128]" ] && echo 0 || echo 1) "JSON: the samples of the steps each attempt began"
fi
"$BIN" run --json "$T/r2.json" "$T/s.yaml" > /dev/null 2>&1
ok $(cmp -s "$T/r.json" "$T/r2.json" && echo 0 || echo 1) "a sim run with retries is the same byte for byte"

scenario sim:1.5GiB "on_oom: halve_batch, keep_effective_batch: false"
"$BIN" run "$T/s.yaml" > "$T/out.txt" 2>&1
ok $([ "$(attempts)" = "64x1:oom 32x1:oom 16x1:ok" ] && echo 0 || echo 1) "keep_effective_batch false: one micro-batch each ($(attempts))"

scenario sim:1.5GiB "on_oom: halve_batch, min_batch_size: 32" true
"$BIN" run "$T/s.yaml" > "$T/out.txt" 2>&1; rc=$?
ok $([ $rc = 0 ] && [ "$(attempts)" = "64x1:oom 32x2:oom" ] && echo 0 || echo 1) "min_batch_size 32: it stops at 32 and the OOM stands ($(attempts), exit $rc)"
ok $(contains "$(cat "$T/out.txt")" "never settled: 2 OOMs, the last one ends the run") "and says so"
scenario sim:1.5GiB "on_oom: halve_batch, max_retries: 0" true
"$BIN" run "$T/s.yaml" > "$T/out.txt" 2>&1
ok $([ "$(attempts)" = "64x1:oom" ] && echo 0 || echo 1) "max_retries 0: one attempt ($(attempts))"
scenario sim:1.5GiB "on_oom: fail" true
"$BIN" run "$T/s.yaml" > "$T/out.txt" 2>&1; rc=$?
ok $([ $rc = 0 ] && ! grep -q "halve the batch" "$T/out.txt" && echo 0 || echo 1) "on_oom fail: the first OOM ends the run, no retries"

scenario sim:1.5GiB "on_oom: halve_batch, min_batch_size: 32, fallback: [sim:rtx4090]"
"$BIN" run --json "$T/r.json" "$T/s.yaml" > "$T/out.txt" 2>&1; rc=$?
ok $([ $rc = 0 ] && [ "$(attempts)" = "64x1:oom 32x2:oom 64x1:ok" ] && echo 0 || echo 1) "fallback: the RTX 4090 takes over from the job's batch ($(attempts))"
ok $(contains "$(cat "$T/out.txt")" "batch 64 x 1 on sim:rtx4090: ran to the end") "on the fallback device"
[ "$have_python" = 1 ] && ok $([ "$(js "[a['device'] for a in r['attempts']]")" = "['sim:1.5GiB', 'sim:1.5GiB', 'sim:rtx4090']" ] && echo 0 || echo 1) "JSON: each attempt's device"

# the host runs the retried program's kernels on the tensors kept from the first attempt
printf 'name: h\ntitle: t\nsource: tests\ndevice: host:128MiB\nmodel: { preset: tiny-transformer }\njob: { batch_size: 16, seq_len: 64, steps: 1, robust: { on_oom: halve_batch } }\nvariants:\n  before: { expect: { oom: false } }\n' > "$T/h.yaml"
"$BIN" run "$T/h.yaml" > "$T/out.txt" 2>&1; rc=$?
ok $([ $rc = 0 ] && [ "$(attempts)" = "16x1:oom 8x2:oom 4x4:ok" ] && echo 0 || echo 1) "host:128MiB: 16 and 8 OOM, 4 x 4 runs its kernels to the end ($(attempts), exit $rc)"
ok $(contains "$(cat "$T/out.txt")" "kernel time measured") "and its kernel time is measured"

for bad in "on_oom: halve|job.robust.on_oom must be fail or halve_batch, got 'halve'" "on_oom: halve_batch, min_batch_size: 65|min_batch_size: 65 is above the batch size 64" \
           "on_oom: halve_batch, max_retries: 17|job.robust.max_retries must be from 0 to 16, got 17" "on_oom: halve_batch, fallback: [tpu]|job.robust.fallback: unknown device 'tpu'" \
           "on_oom: halve_batch, fallback: sim|must be a list of devices" "retries: 3|retries"; do
    scenario sim:1.5GiB "${bad%%|*}"
    err=$("$BIN" run "$T/s.yaml" 2>&1); rc=$?
    ok $([ $rc = 2 ] && contains "$err" "${bad#*|}" | grep -q 0 && echo 0 || echo 1) "'${bad%%|*}': exit 2 ($err)"
done
done_testing
