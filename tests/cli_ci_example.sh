#!/bin/sh
# cli_ci_example.sh: the README's worked CI example (examples/ci) does what the README says: the gate passes
# on the committed scenario against its baseline, and fails (exit 1, a JUnit failure naming the job) when a
# change to the model (attention back to eager) makes the step stop fitting on the 24 GB card.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

out=$("$BIN" check --baseline examples/ci/baseline.json --junit "$T/ok.xml" examples/ci/ 2>&1); rc=$?
ok $rc "the example's gate passes on the committed scenario ($out)"
ok $(contains "$out" "1 job against the baseline, tolerance 2%: 0 regressed") "and says so"
ok $(grep -q 'failures="0"' "$T/ok.xml" && echo 0 || echo 1) "its JUnit report has no failure"

mkdir "$T/changed"
sed 's/attn: sdpa/attn: eager/' examples/ci/gpt2-medium-finetune.yaml > "$T/changed/gpt2-medium-finetune.yaml"
out=$("$BIN" check --baseline examples/ci/baseline.json --junit "$T/bad.xml" "$T/changed/" 2>&1); rc=$?
ok $([ $rc = 1 ] && echo 0 || echo 1) "eager attention stops it fitting on the RTX 4090: exit 1 (got $rc)"
ok $(contains "$out" "gpt2-medium-finetune/before outcome fits OOM - REGRESSED") "the gate names the job and the outcome"
ok $(grep -q '<failure' "$T/bad.xml" && grep -q 'gpt2-medium-finetune' "$T/bad.xml" && echo 0 || echo 1) \
    "and the JUnit report has the failure"
done_testing
