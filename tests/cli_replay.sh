#!/bin/sh
# cli_replay.sh: `oomlab replay` end to end: text traces (OOM recorded, later free ignored with a warning),
# JSON output, a snapshot's devices (--cuda-device), recorded sites, the real snapshots, and bad input: a
# clear message naming the position, exit code 2, and no result file left behind.
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
ok $([ $rc = 1 ] && echo 0 || echo 1) "text trace with an OOM replays and says so: exit 1 (got $rc)"
ok $(contains "$out" "OOM at line 4: CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0 has a total capacity of 100.00 MiB of which 20.00 MiB is free.") "OOM recorded with PyTorch's message and the line"
ok $(contains "$out" "warning: line 5: free of an allocation that failed with an OOM; ignored") "free of the failed allocation warned about"
ok $(contains "$out" "(modelled)") "figures are labelled modelled"

# a request the recording OOMed on ("oom BYTES"): tried where it was made; with room it succeeds, is given
# back with its segment, and counts in the peak (10 MiB segment + 20 MiB), without room it is the OOM
printf 'alloc a 10MiB\noom 20MiB s0 train.py:9\nfree a\n' > "$T/recorded-oom.trace"
out=$("$BIN" replay --json "$T/roomy.json" "$T/recorded-oom.trace" 2>&1); rc=$?
ok $rc "a recorded OOM request replays with room to spare: exit 0"
ok $(grep -q '"reserved_bytes.all.peak": 31457280' "$T/roomy.json" && grep -q '"reserved_bytes.all.current": 10485760' "$T/roomy.json" \
     && grep -q '"num_device_free": 1' "$T/roomy.json" && echo 0 || echo 1) \
    "its peak counts the request (30 MiB), its segment is given back (10 MiB stay)"
out=$("$BIN" replay --capacity 24MiB "$T/recorded-oom.trace" 2>&1); rc=$?
ok $([ $rc = 1 ] && echo 0 || echo 1) "on 24 MiB it OOMs again: exit 1 (got $rc)"
ok $(contains "$out" "OOM at line 2: CUDA out of memory. Tried to allocate 20.00 MiB.") "with PyTorch's message and its line"
out=$(printf 'oom 1MiB s0 a b\n' | "$BIN" replay - 2>&1); rc=$?
ok $([ $rc = 2 ] && [ "$(contains "$out" "standard input:1:15: expected 'oom BYTES [STREAM] [TAG]'")" = 0 ] && echo 0 || echo 1) \
    "a malformed oom line: exit 2 at its column ($out)"

# a share of the device keeps its CUDA context: 25% of a 2104 MiB sim is 526 MiB, 426 of them the
# context of the architecture a bare size takes, so the same 100 MiB for segments and the same OOM
out=$("$BIN" replay --device sim:2104MiB --capacity 25% "$T/oom.trace" 2>&1)
ok $(contains "$out" "GPU 0 has a total capacity of 526.00 MiB of which 20.00 MiB is free.") "--capacity 25% of sim:2104MiB OOMs as 100MiB does"
"$BIN" replay --capacity 100MiB --json "$T/r.json" "$T/oom.trace" > /dev/null 2>&1
ok $([ $? = 1 ] && [ -s "$T/r.json" ] && echo 0 || echo 1) "--json writes (exit 1: the trace OOMs)"
j=$(cat "$T/r.json" 2>/dev/null)
ok $(contains "$j" '"reserved_bytes.all.peak": 83886080') "JSON carries memory_stats keys (reserved peak 80 MiB)"
ok $(contains "$j" '"num_ooms": 1') "JSON num_ooms"
ok $(contains "$j" '"where": 4') "JSON OOM position is the line"
ok $(contains "$j" '"schema_version": 1') "JSON carries its schema version"

out=$(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$BIN" replay --capacity 100MiB "$T/oom.trace" 2>&1)
ok $(contains "$out" "settings:  \$PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True") "PYTORCH_CUDA_ALLOC_CONF from the environment, where the file records no settings"

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
bad "unknown verb" "verb.trace:2:1: unknown verb 'allocate'" "$BIN" replay --json "$T/bad.json" "$T/verb.trace"
printf 'alloc a -5\n' > "$T/neg.trace"
bad "negative size" "neg.trace:1:9: size '-5' is negative" "$BIN" replay --json "$T/bad.json" "$T/neg.trace"
printf 'free zz\n' > "$T/free.trace"
bad "free of unknown id" "free.trace:1:6: free of 'zz', which is not live" "$BIN" replay --json "$T/bad.json" "$T/free.trace"
bad "malformed alloc-conf" "allocator config 'max_split_size_mb:5', column 19: CachingAllocator option max_split_size_mb too small, must be >= 20" \
    "$BIN" replay --alloc-conf max_split_size_mb:5 --json "$T/bad.json" "$T/oom.trace"
bad "bad capacity" "--capacity: size '12 parsecs' has an unknown unit" "$BIN" replay --capacity "12 parsecs" --json "$T/bad.json" "$T/oom.trace"
bad "zero capacity" "--capacity: capacity '0' is zero" "$BIN" replay --capacity 0 --json "$T/bad.json" "$T/oom.trace"
bad "capacity share above 100%" "capacity '150%' is not a percentage in (0, 100]" "$BIN" replay --capacity 150% --json "$T/bad.json" "$T/oom.trace"
bad "a bare number above 1" "capacity '1.5': a bare number is a share in (0, 1]; give a size with its unit" "$BIN" replay --capacity 1.5 --json "$T/bad.json" "$T/oom.trace"
bad "missing file" "nosuch.trace: cannot open" "$BIN" replay --json "$T/bad.json" "$T/nosuch.trace"
bad "unknown device" "unknown device 'gpu9'" "$BIN" replay --device gpu9 --json "$T/bad.json" "$T/oom.trace"

printf 'alloc a 10\nfree a\nfree a\n' > "$T/double.trace"
bad "double free" "double.trace:3:6: free of 'a', which is not live" "$BIN" replay --json "$T/bad.json" "$T/double.trace"
printf 'alloc a 10\nalloc a 20\n' > "$T/again.trace"
bad "alloc of a live id" "again.trace:2:7: 'a' is allocated again while still live" "$BIN" replay --json "$T/bad.json" "$T/again.trace"
printf 'alloc a 10\nkernel gemm fp32 M=1 N=1 K=1 transA=0 transB=0 batch=0 a b a x\n' > "$T/kernel.trace"
bad "kernel of a dead tensor" "kernel.trace:2:58: kernel names 'b', which is not live" "$BIN" replay --json "$T/bad.json" "$T/kernel.trace"
printf 'alloc a 10\nkernel gemm fp32 M=1 N=1 t0\n' > "$T/kdims.trace"
bad "kernel without its dims" "kdims.trace:2:26: gemm: expected K=N" "$BIN" replay --json "$T/bad.json" "$T/kdims.trace"
printf 'alloc a 10 s0 weights\n' > "$T/cat.trace"
bad "unknown category" "cat.trace:1:15: unknown category 'weights'" "$BIN" replay --json "$T/bad.json" "$T/cat.trace"
printf 'alloc a 10 010\nalloc b 10 0x1\n' > "$T/octal.trace"
bad "a stream is decimal" "octal.trace:2:12: stream '0x1' is not sN or a decimal number N" "$BIN" replay --json "$T/bad.json" "$T/octal.trace"
printf 'alloc a 10\nfree a\0\n' > "$T/nul.trace"
bad "a NUL byte" "nul.trace:2:7: a NUL byte" "$BIN" replay --json "$T/bad.json" "$T/nul.trace"
# a bad line after 300000 good ones (the trace streams through the run): still exit 2, its line, no file
awk 'BEGIN { for (i = 0; i < 150000; i++) printf "alloc t%d %d\nfree t%d\n", i, 512 * (i % 9 + 1), i;
             print "free t7" }' > "$T/late.trace"
bad "a bad line late in a long trace" "late.trace:300001:6: free of 't7', which is not live" \
    "$BIN" replay --json "$T/bad.json" "$T/late.trace"
bad "a directory" "is a directory, not a trace or snapshot file" "$BIN" replay --json "$T/bad.json" "$T"
bad "--json and --csv on one file" "are the same file: give each its own" "$BIN" replay --json "$T/bad.json" --csv "$T/bad.json" "$T/oom.trace"

# the old form, a zero-byte allocation freed without a warning, stdin and gzip
printf 'alloc z 0\nfree z\nalloc a 1MiB 0 param\nstep 1 samples 4\nphase forward\nalloc b 2MiB s1 activation layer.0\nfree b\n' > "$T/ok.trace"
out=$("$BIN" replay "$T/ok.trace" 2>&1); rc=$?
ok $rc "a trace that fits exits 0"
ok $(echo "$out" | grep -q warning && echo 1 || echo 0) "a zero-byte allocation's free is no warning"
ok $(contains "$out" "param 1024.00 KiB") "categories from the trace reach the breakdown"
out2=$(cat "$T/ok.trace" | "$BIN" replay - 2>&1)
ok $(contains "$out2" "param 1024.00 KiB") "'-' reads standard input once (a pipe)"
gzip -c "$T/ok.trace" > "$T/ok.trace.gz"
out3=$("$BIN" replay "$T/ok.trace.gz" 2>&1)
ok $(contains "$out3" "param 1024.00 KiB") "a gzip-compressed trace reads as the plain one"
csv=$("$BIN" replay --csv - "$T/ok.trace" 2>&1)
ok $(echo "$csv" | grep -q '==' && echo 1 || echo 0) "--csv - leaves the table off standard output"
ok $(echo "$csv" | head -1 | grep -q '^group,job,' && echo 0 || echo 1) "--csv - starts with the header"

# "alloc ID BYTES" and "free ID" as most lines write them take a shorter path than other spellings of the same
# ops (blanks, tabs, comments, CRLF): both give the same run, and lines that only start alike are errors
printf 'alloc t1 1MiB\nalloc t2 3145728\nfree t1\nalloc 77 512\nfree t2\nfree 77\n' > "$T/plain.trace"
printf 'alloc  t1 1MiB\r\nalloc\tt2 3145728 # c\r\nfree t1 \r\nalloc 77 512 0\r\n  free t2\r\nfree 77#c\r\n' > "$T/spelled.trace"
"$BIN" replay --json "$T/plain.json" "$T/plain.trace" > /dev/null 2>&1
"$BIN" replay --json "$T/spelled.json" "$T/spelled.trace" > /dev/null 2>&1
ok $([ -s "$T/plain.json" ] && [ "$(cat "$T/plain.json")" = "$(sed 's/spelled\.trace/plain.trace/' "$T/spelled.json")" ] \
     && grep -q '"reserved_bytes.all.peak": 23068672' "$T/plain.json" && echo 0 || echo 1) \
    "the same ops spelled with blanks, tabs, comments and CRLF replay as the plain lines (22 MiB reserved at the peak)"
printf 'alloc a 10\nfree a a\n' > "$T/free2.trace"
bad "free with two IDs" "free2.trace:2:8: expected 'free ID'" "$BIN" replay --json "$T/bad.json" "$T/free2.trace"
printf 'alloc a\n' > "$T/alloc1.trace"
bad "alloc without its bytes" "alloc1.trace:1:1: expected 'alloc ID BYTES" "$BIN" replay --json "$T/bad.json" "$T/alloc1.trace"
printf 'alloc a 10\nfree  zz\n' > "$T/free3.trace"
bad "free of an unknown ID after two blanks" "free3.trace:2:7: free of 'zz', which is not live" "$BIN" replay --json "$T/bad.json" "$T/free3.trace"

# the op program of a scenario is a trace: it replays to the run's own figures (tests/pipeline_test.c
# checks every variant; here the command line)
"$BIN" program --variant after scenarios/unreleased_gradients.yaml > "$T/prog.trace"
"$BIN" run --csv "$T/run.csv" scenarios/unreleased_gradients.yaml > /dev/null
"$BIN" replay --device sim:t4 --csv "$T/replay.csv" "$T/prog.trace" > /dev/null
want=$(grep '"after"' "$T/run.csv" | sed 's/.*,modelled,//' | cut -d, -f1-4)
got=$(tail -1 "$T/replay.csv" | sed 's/.*,modelled,//' | cut -d, -f1-4)
ok $([ -n "$want" ] && [ "$want" = "$got" ] && echo 0 || echo 1) "program | replay: the run's peaks and retries ($got)"

# a snapshot's devices: each replayed apart, one job each in the file's group; --cuda-device N picks one
two=tests/data/snapshots/two-devices.pickle
out=$("$BIN" replay --json "$T/two.json" "$two" 2>&1); rc=$?
ok $rc "two devices replay: exit 0"
ok $(echo "$out" | grep -Eq '^   device 0 +0\.00 GiB +0\.02 GiB' && echo "$out" | grep -Eq '^   device 1 +0\.01 GiB +0\.02 GiB' && echo 0 || echo 1) "a row per device (4 MiB and 8 MiB on a 20 MiB segment each)"
ok $([ "$(echo "$out" | grep -c 'alloc addresses  1/1 matched')" = 2 ] && echo 0 || echo 1) "each device checked against its recording"
ok $(contains "$out" "   device 1:") "each device's details under its name"
ok $([ "$(grep -c '"name": "device [01]"' "$T/two.json")" = 2 ] && echo 0 || echo 1) "JSON: a job per device in one group"
out=$("$BIN" replay --cuda-device 1 "$two" 2>&1); rc=$?
ok $([ $rc = 0 ] && echo "$out" | grep -Eq '^   device 1 ' && ! echo "$out" | grep -q 'device 0' && echo 0 || echo 1) "--cuda-device 1 replays device 1 only"
bad "a device with nothing to replay" "--cuda-device 3: the file has nothing to replay on device 3 (it has something on devices 0 and 1)" "$BIN" replay --cuda-device 3 --json "$T/bad.json" "$two"
bad "--cuda-device not a number" "--cuda-device: 'one' is not a decimal integer" "$BIN" replay --cuda-device one --json "$T/bad.json" "$two"
bad "--cuda-device on a text trace" "--cuda-device picks a device of a PyTorch snapshot; a text trace has one" "$BIN" replay --cuda-device 0 --json "$T/bad.json" "$T/ok.trace"
bad "--snapshot of two devices" "--snapshot writes one device's replay, and the file has 2 devices to replay: pick one with --cuda-device N" "$BIN" replay --snapshot "$T/out.pickle" --json "$T/bad.json" "$two"
ok $([ ! -e "$T/out.pickle" ] && echo 0 || echo 1) "... and writes no snapshot"
printf '\200\002}(X\010\000\000\000segments]X\015\000\000\000device_traces]u.' > "$T/empty.pickle"
out=$("$BIN" replay "$T/empty.pickle" 2>&1); rc=$?
ok $([ $rc = 0 ] && echo 0 || echo 1) "a snapshot that records nothing replays (exit $rc)"
ok $(contains "$out" "warning: the snapshot records nothing to replay: no segments and no trace events") "and says so"

# sites: the recorded frames name an OOM's allocation (scripts/make-snapshot-fixtures' sites())
out=$("$BIN" replay --capacity 40MiB tests/data/snapshots/sites.pickle 2>&1)
ok $(contains "$out" "at the OOM in train.py:100 main > train.py:77 step: other 4.00 MiB") "an OOM is named by the site of its allocation"

# recorded and replayed figures side by side, and a warning when a replay does not end where its recording did
# (paused.pickle: recording was paused when a traced allocation was freed)
out=$("$BIN" replay tests/data/snapshots/paused.pickle 2>&1)
ok $(contains "$out" "warning: the replay does not end where the recording did") "a replay that drifts says so up front"
ok $(contains "$out" "at the end recorded 20.00 MiB reserved, 0 bytes allocated; replayed 20.00 MiB reserved (+0.0%), 4.00 MiB allocated (none recorded): the replay drifted from the recording") \
    "and shows the recorded and replayed figures side by side"
"$BIN" replay --json "$T/paused.json" tests/data/snapshots/paused.pickle > /dev/null 2>&1
ok $(grep -q '"drifted": true' "$T/paused.json" && echo 0 || echo 1) "the JSON says it drifted"
out=$("$BIN" replay tests/data/snapshots/sites.pickle 2>&1)
ok $(contains "$out" "at the end recorded 50.00 MiB reserved, 34.00 MiB allocated; replayed the same") \
    "an exact replay shows the figures it reproduced"
ok $([ "$(contains "$out" "does not end where")" = 1 ] && echo 0 || echo 1) "and warns of nothing"

# issue 14: the Yiyi OOM snapshot's 11.03 GiB, all held by one allocation site, named with its caller
yiyi="$SHARED/data/pytorch-snapshots/Yiyi-philosophy_LLM-inference__oom_snapshot.pickle"
if [ -f "$yiyi" ]; then
    out=$("$BIN" replay "$yiyi" 2>&1)
    ok $(contains "$out" "replay 11.03 GiB other in before recording: flex_opt.py:125 init_weight_list > pytorch_backend.py:190 allocate (460)") \
        "Yiyi: the largest holder is init_weight_list's allocation helper, 11.03 GiB in 460 blocks"
    "$BIN" replay --json "$T/yiyi.json" "$yiyi" > /dev/null 2>&1
    ok $(grep -q '"holder": "flex_opt.py:125 init_weight_list > pytorch_backend.py:190 allocate"' "$T/yiyi.json" && echo 0 || echo 1) \
        "and the JSON names it"
fi

if [ -f "$SHARED/data/pytorch-snapshots/ZidongLiu_DeComFL__memory.pickle" ]; then
    snap="$SHARED/data/pytorch-snapshots/ZidongLiu_DeComFL__memory.pickle"
    out=$("$BIN" replay "$snap" 2>&1); rc=$?
    ok $rc "DeComFL replays as recorded: exit 0"
    ok $(contains "$out" "segment_allocs   61/61 matched") "DeComFL: 61/61 segment_allocs"
    ok $(contains "$out" "alloc addresses  7946/7946 matched") "DeComFL: 7946/7946 addresses, with no flag"
    ok $(contains "$out" "final layout     every segment's blocks match") "DeComFL: final layout"
    ok $(contains "$out" "settings:  recorded in the snapshot") "DeComFL: under the settings it recorded"
    ok $(contains "$out" "the trace holds in 1.77 GiB reserved at its peak") "DeComFL: the capacity it needs"
    out=$("$BIN" replay --capacity 400MiB "$snap" 2>&1); rc=$?
    ok $([ $rc = 1 ] && echo 0 || echo 1) "DeComFL on --capacity 400MiB OOMs: exit 1 (got $rc)"
    ok $(contains "$out" "too small: with room to spare the trace reserves 1.77 GiB at its peak: replay without --device/--capacity to reproduce the recording, or give --capacity 1.77GiB; less can do") "a named device too small says what holds it"
    ok $(contains "$out" "addresses: the sim's deterministic policy") "a what-if places segments by the sim's policy"
    out=$("$BIN" replay --alloc-conf expandable_segments:True "$snap" 2>&1)
    ok $(contains "$out" "settings:  --alloc-conf (a what-if: not the recorded settings): expandable_segments:True") "--alloc-conf is a what-if, and says so"
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
