#!/bin/sh
# cli_alloc_conf.sh: allocator settings the model does not model (backend:cudaMallocAsync) are refused
# by every command with the same message, exit code 2 and no result: `run` and `program` where the
# scenario names them (file:line:col), `replay` from --alloc-conf and from the environment. The
# model's own backend, `backend:native`, runs everywhere.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

scenario() { # file, alloc_conf
    printf 'name: async\ntitle: t\nsource: s\nalloc_conf: "%s"\nmodel: { preset: tiny-mlp }\njob: { batch_size: 2 }\nvariants:\n  before: { expect: { oom: false } }\n' "$2" > "$1"
}
scenario "$T/async.yaml" "backend:cudaMallocAsync"
scenario "$T/native.yaml" "backend:native"
printf 'alloc a 10MiB\nfree a\n' > "$T/t.trace"

why="backend:cudaMallocAsync is the CUDA driver's stream-ordered allocator, which oomlab does not model"
refused() { # name, expected text, command...
    name=$1; want=$2; shift 2
    rm -f "$T/out.json"
    out=$("$@" 2>&1); rc=$?
    ok $([ $rc = 2 ] && echo 0 || echo 1) "$name: exit 2 (got $rc)"
    ok $(contains "$out" "$want") "$name: says '$want' (got: $out)"
    ok $([ ! -e "$T/out.json" ] && echo 0 || echo 1) "$name: no result written"
}
refused "run" "async.yaml:4:13: alloc_conf: allocator config 'backend:cudaMallocAsync', column 9: $why" \
    "$BIN" run --json "$T/out.json" "$T/async.yaml"
refused "program" "async.yaml:4:13: alloc_conf: allocator config 'backend:cudaMallocAsync', column 9: $why" \
    "$BIN" program "$T/async.yaml"
refused "replay --alloc-conf" "allocator config 'backend:cudaMallocAsync', column 9: $why" \
    "$BIN" replay --alloc-conf backend:cudaMallocAsync --json "$T/out.json" "$T/t.trace"
refused "replay under PYTORCH_CUDA_ALLOC_CONF" "allocator config 'expandable_segments:True,backend:cudaMallocAsync', column 34: $why" \
    env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,backend:cudaMallocAsync "$BIN" replay --json "$T/out.json" "$T/t.trace"

"$BIN" run "$T/native.yaml" > /dev/null 2>&1
ok $? "run: backend:native runs"
out=$("$BIN" program "$T/native.yaml" | head -1)
ok $(contains "$out" "alloc_conf 'backend:native'") "program: backend:native, named in the header line"
"$BIN" replay --alloc-conf backend:native "$T/t.trace" > /dev/null 2>&1
ok $? "replay: backend:native runs"
done_testing
