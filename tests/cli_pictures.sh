#!/bin/sh
# cli_pictures.sh: `oomlab run --plot DIR --perfetto DIR` and `oomlab replay --plot DIR --perfetto FILE` end
# to end: every picture and trace named in --help is written (PNGs with the PNG signature, SVGs, JSON),
# the results printed do not change, and an output directory that cannot be made fails before anything
# runs: exit 2, a message naming the flag, no result file and no temporary left behind.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"
png() { [ "$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] && echo 0 || echo 1; }

"$BIN" run scenarios/vae_decode_burst.yaml > "$T/plain.txt" 2>&1
"$BIN" run --plot "$T/pics" --perfetto "$T/traces" scenarios/vae_decode_burst.yaml > "$T/run.txt" 2> "$T/err.txt"
ok $? "run --plot --perfetto exits 0 $(head -c 200 "$T/err.txt")"
ok $(cmp -s "$T/plain.txt" "$T/run.txt" && echo 0 || echo 1) "the results printed are those of a plain run"
for v in before after; do
    for p in timeline segments; do
        ok $(png "$T/pics/vae-decode-burst--$v-$p.png") "vae-decode-burst--$v-$p.png is a PNG"
        ok $(head -c 200 "$T/pics/vae-decode-burst--$v-$p.svg" | grep -q '<svg' && echo 0 || echo 1) "vae-decode-burst--$v-$p.svg is an SVG"
    done
    ok $(head -c 40 "$T/traces/vae-decode-burst--$v.json" | grep -q '^{"displayTimeUnit"' && echo 0 || echo 1) "traces/vae-decode-burst--$v.json written"
done
ok $(png "$T/pics/vae-decode-burst-variants.png") "vae-decode-burst-variants.png: the scenario's variants"
ok $(ls "$T/pics" "$T/traces" | grep -c '\.tmp\.' | grep -qx 0 && echo 0 || echo 1) "no temporary left"
ok $(ls "$T/pics" | wc -l | grep -qx 10 && echo 0 || echo 1) "10 picture files: 2 variants x 2 pictures x SVG, PNG, and the variants chart"

help=$("$BIN" run --help)
ok $(contains "$help" "--plot DIR") "run --help names --plot"
ok $(contains "$help" "--perfetto DIR") "run --help names --perfetto"

# an output directory that cannot be made: exit 2 before anything runs, nothing written
: > "$T/a-file"
out=$("$BIN" run --plot "$T/a-file/pics" --json "$T/bad.json" scenarios/vae_decode_burst.yaml 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "--plot under a regular file exits 2 (got $rc)"
ok $(contains "$out" "--plot: $T/a-file/pics: cannot make the directory") "and says why ($out)"
ok $([ ! -e "$T/bad.json" ] && echo 0 || echo 1) "no result file written"
out=$("$BIN" run --perfetto "$T/missing/deeper" scenarios/vae_decode_burst.yaml 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "--perfetto two levels below anything exits 2 (got $rc: $out)"
ok $([ ! -e "$T/missing" ] && echo 0 || echo 1) "and makes nothing"

# replay: the pictures named after the file, the trace at the path given
snap=tests/data/snapshots/expandable-map-unmap.pickle
"$BIN" replay --plot "$T/rp" --perfetto "$T/rp.json" "$snap" > /dev/null 2> "$T/err.txt"; rc=$?
ok $([ $rc -le 1 ] && echo 0 || echo 1) "replay --plot --perfetto runs (exit $rc) $(head -c 200 "$T/err.txt")"
ok $(png "$T/rp/expandable-map-unmap-timeline.png") "replay: expandable-map-unmap-timeline.png"
ok $(png "$T/rp/expandable-map-unmap-segments.png") "replay: expandable-map-unmap-segments.png"
ok $(head -c 40 "$T/rp.json" | grep -q '^{"displayTimeUnit"' && echo 0 || echo 1) "replay: the trace at the path given"
out=$("$BIN" replay --perfetto - "$snap" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "replay --perfetto - exits 2 (got $rc: $out)"
out=$("$BIN" replay --plot "$T/a-file/x" "$snap" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "replay --plot under a regular file exits 2 (got $rc)"
mkdir "$T/adir"
out=$("$BIN" replay --perfetto "$T/adir" "$snap" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "replay --perfetto onto a directory exits 2 (got $rc: $out)"
ok $(ls "$T" | grep -c '\.tmp\.' | grep -qx 0 && echo 0 || echo 1) "and leaves no temporary behind"
# a snapshot of two devices: pictures per device, and one trace file refused until a device is named
two=tests/data/snapshots/two-devices.pickle
"$BIN" replay --plot "$T/two" "$two" > /dev/null 2>&1
ok $([ -s "$T/two/two-devices-device-0-timeline.png" ] && [ -s "$T/two/two-devices-device-1-timeline.png" ] && echo 0 || echo 1) \
    "replay --plot of two devices draws each under its own name"
out=$("$BIN" replay --perfetto "$T/two.json" "$two" 2>&1); rc=$?
ok $([ $rc = 2 ] && [ ! -e "$T/two.json" ] && echo 0 || echo 1) "replay --perfetto of two devices exits 2, writing nothing ($out)"
"$BIN" replay --perfetto "$T/two1.json" --cuda-device 1 "$two" > /dev/null 2>&1
ok $([ -s "$T/two1.json" ] && echo 0 || echo 1) "with --cuda-device 1 it writes that device's trace"
done_testing
