#!/bin/sh
# cli_replay.sh: `oomlab replay` end to end: text traces (OOM recorded, later free ignored with a warning),
# JSON output, the real snapshots, and bad input: a clear message naming the position, exit code 2,
# and no result file left behind.
BIN=${OOMLAB_BIN:-build/oomlab}
SHARED=${OOMLAB_SHARED:-../shared}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

cat > "$T/oom.trace" <<'TR'
# a 100 MiB device: the third 40 MiB tensor does not fit
alloc a 40MiB
alloc b 40MiB
alloc c 40MiB   # OOM: 80 MiB reserved + a 40 MiB segment > 100 MiB
free c          # the failed allocation does not exist: ignored with a warning
free a
alloc d 30MiB 1
empty_cache
TR
out=$("$BIN" replay --capacity 100MiB "$T/oom.trace" 2>&1); rc=$?
ok $rc "text trace with an OOM replays (exit 0)"
ok $(contains "$out" "OOM at line 4: CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0 has a total capacity of 100.00 MiB of which 20.00 MiB is free.") "OOM recorded with PyTorch's message and the line"
ok $(contains "$out" "free of 'c', whose allocation failed; ignored") "free of the failed allocation warned about"
ok $(contains "$out" "(modelled)") "figures are labelled modelled"

# a share of the device keeps its CUDA context: 25% of a 2104 MiB sim is 526 MiB, 426 of them the
# context of the architecture a bare size takes, so the same 100 MiB for segments and the same OOM
out=$("$BIN" replay --device sim:2104MiB --capacity 25% "$T/oom.trace" 2>&1)
ok $(contains "$out" "GPU 0 has a total capacity of 526.00 MiB of which 20.00 MiB is free.") "--capacity 25% of sim:2104MiB OOMs as 100MiB does"
"$BIN" replay --capacity 100MiB --json "$T/r.json" "$T/oom.trace" > /dev/null 2>&1
ok $? "--json writes"
j=$(cat "$T/r.json" 2>/dev/null)
ok $(contains "$j" '"reserved_bytes.all.peak": 83886080') "JSON carries memory_stats keys (reserved peak 80 MiB)"
ok $(contains "$j" '"num_ooms": 1') "JSON num_ooms"
ok $(contains "$j" '"event": 4') "JSON OOM event is the line"

out=$(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$BIN" replay --capacity 100MiB "$T/oom.trace" 2>&1)
ok $(contains "$out" "settings   expandable_segments:True") "PYTORCH_CUDA_ALLOC_CONF from the environment"

# bad input: message with position, exit 2, no JSON written
bad() { # name, expected text, command...
    name=$1; want=$2; shift 2
    rm -f "$T/bad.json"
    out=$("$@" 2>&1); rc=$?
    ok $([ $rc = 2 ] && echo 0 || echo 1) "$name: exit 2 (got $rc)"
    ok $(contains "$out" "$want") "$name: message '$want' (got: $out)"
    ok $([ ! -e "$T/bad.json" ] && echo 0 || echo 1) "$name: no result file left"
}
printf 'alloc a 10\nallocate b 10\n' > "$T/verb.trace"
bad "unknown verb" "verb.trace:2:1: unknown trace verb 'allocate'" "$BIN" replay --json "$T/bad.json" "$T/verb.trace"
printf 'alloc a -5\n' > "$T/neg.trace"
bad "negative size" "neg.trace:1:9: size '-5' is negative" "$BIN" replay --json "$T/bad.json" "$T/neg.trace"
printf 'free zz\n' > "$T/free.trace"
bad "free of unknown id" "free.trace:1:6: free of 'zz', which no earlier line allocates" "$BIN" replay --json "$T/bad.json" "$T/free.trace"
bad "malformed alloc-conf" "allocator config 'max_split_size_mb:5', column 19: CachingAllocator option max_split_size_mb too small, must be >= 20" \
    "$BIN" replay --alloc-conf max_split_size_mb:5 --json "$T/bad.json" "$T/oom.trace"
bad "bad capacity" "--capacity: size '12 parsecs' has an unknown unit" "$BIN" replay --capacity "12 parsecs" --json "$T/bad.json" "$T/oom.trace"
bad "zero capacity" "--capacity: capacity '0' is zero" "$BIN" replay --capacity 0 --json "$T/bad.json" "$T/oom.trace"
bad "capacity share above 100%" "capacity '150%' is not a percentage in (0, 100]" "$BIN" replay --capacity 150% --json "$T/bad.json" "$T/oom.trace"
bad "fractional bytes" "capacity '1.5': a bare number is a fraction in (0, 1] or a whole count of bytes" "$BIN" replay --capacity 1.5 --json "$T/bad.json" "$T/oom.trace"
bad "missing file" "nosuch.trace: cannot open" "$BIN" replay --json "$T/bad.json" "$T/nosuch.trace"
bad "unknown device" "unknown device 'gpu9'" "$BIN" replay --device gpu9 --json "$T/bad.json" "$T/oom.trace"

if [ -f "$SHARED/data/pytorch-snapshots/ZidongLiu_DeComFL__memory.pickle" ]; then
    snap="$SHARED/data/pytorch-snapshots/ZidongLiu_DeComFL__memory.pickle"
    out=$("$BIN" replay --same-addresses "$snap" 2>&1)
    ok $(contains "$out" "segment_allocs   61/61 matched") "DeComFL: 61/61 segment_allocs"
    ok $(contains "$out" "alloc addresses  7946/7946 matched") "DeComFL: 7946/7946 addresses with --same-addresses"
    ok $(contains "$out" "final layout     every segment's blocks match") "DeComFL: final layout"
    head -c 100000 "$snap" > "$T/trunc.pickle"
    bad "truncated pickle" "trunc.pickle: truncated pickle at byte" "$BIN" replay --json "$T/bad.json" "$T/trunc.pickle"
    printf '\200\004}(\214\010segments\214\001xu.' > "$T/types.pickle"
    bad "wrong types" "types.pickle: segments: expected a list" "$BIN" replay --json "$T/bad.json" "$T/types.pickle"
    printf '\200\004\214\010builtins\214\004eval\223.' > "$T/global.pickle"
    bad "unsupported opcode" "unsupported pickle opcode 0x93 (STACK_GLOBAL)" "$BIN" replay --json "$T/bad.json" "$T/global.pickle"
else
    echo "# shared snapshots not found; snapshot cases skipped"
fi
done_testing
