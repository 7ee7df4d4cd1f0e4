#!/bin/sh
# results_schema.sh: every key the results document's writer emits is documented in docs/results-schema.md
# (run on sim with an OOM and an expectation and a pipeline-parallel job, a measured host replay, fit, a
# snapshot replay with its check), and the document says its schema and version.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"
DOC=docs/results-schema.md

"$BIN" run --json "$T/run.json" scenarios/vae_decode_burst.yaml scenarios/unreleased_gradients.yaml \
    scenarios/pipeline_gpipe_activations.yaml > /dev/null 2>&1
"$BIN" fit --json "$T/fit.json" scenarios/unreleased_gradients.yaml > /dev/null 2>&1
"$BIN" replay --json "$T/snap.json" tests/data/snapshots/sites.pickle > /dev/null 2>&1
printf 'step 1 samples 1\nphase forward\nalloc a 64MiB\nfree a\n' > "$T/host.trace"
"$BIN" replay --device host:256MiB --json "$T/host.json" "$T/host.trace" > /dev/null 2>&1
"$BIN" stress --capacity 256MiB --json "$T/stress.json" tests/data/stress/fill_20mib.yaml tests/data/stress/churn.yaml \
    tests/data/stress/oom_storm.yaml tests/data/stress/soak.yaml tests/data/stress/streams_sync.yaml > /dev/null 2>&1
for f in run fit snap host stress; do
    ok $([ -s "$T/$f.json" ] && echo 0 || echo 1) "$f: a results document was written"
done
ok $(grep -q '"schema": "oomlab-results"' "$T/run.json" && grep -q '"schema_version": 1' "$T/run.json" && echo 0 || echo 1) \
    "it names its schema and version 1"
# keys: every "name": of the documents, but memory_stats' dotted names (documented as PyTorch's)
keys=$(cat "$T"/*.json | grep -o '"[A-Za-z_][A-Za-z0-9_]*":' | tr -d '":' | sort -u)
missing=""
for k in $keys; do
    grep -q "\`$k\`" "$DOC" || missing="$missing $k"
done
ok $([ -z "$missing" ] && echo 0 || echo 1) "every key is documented in $DOC (missing:${missing:- none})"
ok $([ $(echo "$keys" | wc -l) -gt 80 ] && echo 0 || echo 1) "the check saw the documents' keys ($(echo "$keys" | wc -l) distinct)"
done_testing
