#!/bin/sh
# cli_stress.sh: `oomlab stress` end to end: the profiles of scenarios/stress/ (the make run pass) with
# their table, JSON, CSV and TAP; a failed check exits 1; bad profiles: a message naming file:line:col,
# exit 2, no result file; and record_stream / sync in a text trace.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

"$BIN" stress --json "$T/s.json" --csv "$T/s.csv" scenarios/stress/ > "$T/s.txt" 2>&1; rc=$?
out=$(cat "$T/s.txt")
ok $([ $rc = 0 ] && echo 0 || echo 1) "scenarios/stress/ runs and every check holds (exit $rc)"
for k in fill churn oom_storm soak streams; do
    ok $(contains "$out" "kind $k on sim:rtx4090") "the $k profile ran"
done
ok $(contains "$out" "figures modelled") "figures are labelled modelled"
ok $(grep -q '"command": "stress"' "$T/s.json" && grep -q '"kind": "stress"' "$T/s.json" && grep -q '"checks"' "$T/s.json" &&
     echo 0 || echo 1) "the JSON is a results document of kind stress with the checks"
ok $([ $(grep -c . "$T/s.csv") = 11 ] && echo 0 || echo 1) "CSV: a header and one row per profile and setting"
for f in s.txt s.json s.csv; do # sim is deterministic: the committed baseline to the byte
    base=results/stress.${f#s.}
    ok $(cmp -s "$T/$f" "$base" && echo 0 || echo 1) "$base equals a fresh run (scripts/update-baselines rewrites it)"
done
out=$("$BIN" stress --device host:256MiB --capacity 256MiB --tap tests/data/stress/fill_20mib.yaml 2>&1)
ok $(contains "$out" "ok 1 - fill-20mib/default: ended by an OOM") "TAP: a line per check, on host"
out=$("$BIN" stress --device host:256MiB tests/data/stress/fill_20mib.yaml 2>&1)
ok $(contains "$out" "figures measured") "on host the figures are labelled measured"
"$BIN" stress --capacity 256MiB tests/data/stress/soak_growing.yaml > /dev/null 2>&1
ok $([ $? = 1 ] && echo 0 || echo 1) "a failed check exits 1"

bad() { # NAME EXPECTED-MESSAGE, the profile in $T/NAME.yaml
    out=$("$BIN" stress --json "$T/$1.json" "$T/$1.yaml" 2>&1); rc=$?
    ok $([ $rc = 2 ] && [ ! -e "$T/$1.json" ] && echo 0 || echo 1) "$1: exit 2 (got $rc), no result file"
    ok $(contains "$out" "$T/$1.yaml:$2") "$1: names the position ($out)"
}
printf 'name: x\ntitle: t\nkind: fill\nfill:\n  sizes: { distribution: fixed, size: 1MiB }\n  max_blocs: 3\n' > "$T/unknown-key.yaml"
bad unknown-key "6:3: unknown key 'max_blocs' in fill (did you mean 'max_blocks'?)"
printf 'name: x\ntitle: t\nkind: fill\nchurn: { sizes: { size: 1MiB } }\n' > "$T/wrong-section.yaml"
bad wrong-section "4:1: churn: given, but the profile's kind is fill"
printf 'name: x\ntitle: t\nkind: soak\n' > "$T/missing-section.yaml"
bad missing-section "3:1: kind soak needs a \`soak:\` section"
printf 'name: x\ntitle: t\nkind: churn\nchurn:\n  sizes: { distribution: uniform, max: 1MiB }\n' > "$T/no-min.yaml"
bad no-min "5:12: churn.sizes: distribution uniform needs min and max"
printf 'name: x\ntitle: t\nkind: churn\nalloc_conf: ["", "expandable_segments:Maybe"]\nchurn: { sizes: { size: 1MiB } }\n' > "$T/bad-conf.yaml"
bad bad-conf "4:18: alloc_conf[1]"
printf 'name: x\ntitle: t\nkind: fill\nfill: { sizes: { distribution: mix, mix: [1MiB, lots] } }\n' > "$T/bad-mix.yaml"
bad bad-mix "4:49: fill.sizes.mix[1]"
printf 'name: x\ntitle: t\nkind: churn\nchurn: { sizes: { distribution: snapshot, from_snapshot: none.pickle } }\n' > "$T/no-snapshot.yaml"
bad no-snapshot "4:43: churn.sizes.from_snapshot"
printf 'name: x\ntitle: t\nkind: streams\nstreams: { sizes: { size: 1MiB }, streams: 9 }\n' > "$T/many-streams.yaml"
bad many-streams "4:44: streams.streams"
printf 'name: x\ntitle: t\nkind: soak\nsoak: { scenario: nowhere.yaml }\n' > "$T/no-scenario.yaml"
bad no-scenario "4:9: soak.scenario: $T/nowhere.yaml: cannot open"

# the executed op programs (--program DIR) are ordinary op programs: replayed, they give the same memory_stats
first_stats() { awk '/"stats": \{/ { f = 1 } f { print } f && /\}/ { exit }' "$1"; }
"$BIN" stress --capacity 256MiB --json "$T/f.json" --program "$T/prog" tests/data/stress/fill_20mib.yaml \
    scenarios/stress/streams.yaml > /dev/null 2>&1
ok $([ -s "$T/prog/fill-20mib--1.trace" ] && [ -s "$T/prog/streams-record--2.trace" ] && echo 0 || echo 1) \
    "--program writes each setting's op program"
"$BIN" replay --capacity 256MiB --json "$T/fr.json" "$T/prog/fill-20mib--1.trace" > /dev/null 2>&1
ok $([ -n "$(first_stats "$T/fr.json")" ] && [ "$(first_stats "$T/f.json")" = "$(first_stats "$T/fr.json")" ] &&
     echo 0 || echo 1) "the fill's program replays to the same memory_stats, its OOM included"
"$BIN" stress --json "$T/st.json" scenarios/stress/streams.yaml > /dev/null 2>&1
"$BIN" replay --json "$T/sr.json" "$T/prog/streams-record--1.trace" > /dev/null 2>&1
ok $([ -n "$(first_stats "$T/sr.json")" ] && [ "$(first_stats "$T/st.json")" = "$(first_stats "$T/sr.json")" ] &&
     echo 0 || echo 1) "the streams program, record_stream and sync included, replays to the same memory_stats"

# record_stream in a text trace: the block freed after its use on stream 1 is not reused until stream 1 syncs
printf 'alloc a 20MiB\nrecord_stream a 1\nfree a\nalloc b 20MiB\nfree b\nsync 1\nalloc c 20MiB\n' > "$T/rs.trace"
"$BIN" replay --json "$T/rs.json" "$T/rs.trace" > /dev/null 2>&1
ok $(grep -q '"reserved_bytes.all.peak": 41943040' "$T/rs.json" && grep -q '"reserved_bytes.all.current": 41943040' "$T/rs.json" &&
     echo 0 || echo 1) "text trace: b needs a second segment, c reuses a (40 MiB reserved)"
printf 'alloc a 1MiB\nrecord_stream a\n' > "$T/bad.trace"
out=$("$BIN" replay "$T/bad.trace" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "a record_stream without its stream: exit 2 (got $rc)"
ok $(contains "$out" "bad.trace:2:1: expected 'record_stream ID STREAM'") "and says what is expected ($out)"
# churn's compute load: a 1024^3 fp32 GEMM every 100 of 2,000 ops, on sim (modelled) and host (measured)
printf 'name: burn\ntitle: t\nkind: churn\ndevice: sim:rtx4090\nseed: 7\nchurn:\n  sizes: { distribution: log_uniform, min: 512B, max: 64MiB }\n  ops: 2000\n  occupancy: 0.5\n  points: 4\n  burn_every: 100\n  burn_size: 1024\n' > "$T/burn.yaml"
out=$("$BIN" stress --json "$T/burn.json" "$T/burn.yaml" 2>&1); rc=$?
ok $([ $rc = 0 ] && grep -q '"burn_gemms": 20' "$T/burn.json" && echo 0 || echo 1) "burn: 20 GEMMs in 2,000 ops, every churn op still run (exit $rc)"
ok $(contains "$out" "compute load: 20 fp32 GEMMs (0.0429 TFLOP) while churning") "and the table says so, 2 x 1024^3 FLOP each"
out=$("$BIN" stress --device host:512MiB "$T/burn.yaml" 2>&1)
ok $(contains "$out" "s of kernels (measured)") "on the host the GEMMs run and are timed"
printf 'name: burn\ntitle: t\nkind: churn\ndevice: sim:1GiB\nchurn:\n  sizes: { distribution: fixed, size: 1MiB }\n  ops: 10\n  burn_every: 2\n  burn_size: 16384\n' > "$T/big.yaml"
err=$("$BIN" stress "$T/big.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && contains "$err" "churn.burn_size 16384: its three buffers (3.00 GiB) do not fit the device" | grep -q 0 && echo 0 || echo 1) "a burn too big for the device: exit 2 ($err)"
done_testing
