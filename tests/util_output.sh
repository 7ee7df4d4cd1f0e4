#!/bin/sh
# util_output.sh: result files through the command line (util/output.h): a character device, a FIFO
# and a symlink are written without being replaced, what cannot be written is refused with its reason
# and exit 2 and left as it was, a writer ended by SIGINT or SIGTERM leaves no temporary behind, and a
# full disk says "No space left on device". `replay --json` writes when the replay is done; `run --csv`
# opens its file before the first scenario.
BIN=${OOMLAB_BIN:-build/oomlab}
. "$(dirname "$0")/tap.shlib"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf 'alloc a 512\nfree a\n' > "$T/trace.txt"
cat > "$T/tiny.yaml" <<'EOF'
name: tiny
title: a tiny MLP
source: tests/util_output.sh
model: { family: mlp, mlp_in: 64, mlp_hidden: [64], mlp_out: 10 }
job: { batch_size: 4, steps: 1 }
variants:
  before:
    expect: { oom: false }
EOF
no_temporaries() { [ -z "$(find "$T" -name '*.tmp.*')" ] && echo 0 || echo 1; }

# Under root a regression would replace the device written to, so root writes to private nodes of
# the same devices (1,3 is /dev/null, 1,7 is /dev/full); other users cannot replace /dev's nodes.
if mknod "$T/null" c 1 3 2>/dev/null && mknod "$T/full" c 1 7 2>/dev/null; then
    NULLDEV=$T/null FULLDEV=$T/full
else
    NULLDEV=/dev/null FULLDEV=/dev/full
fi
"$BIN" replay --json "$NULLDEV" "$T/trace.txt" > /dev/null; ok $? "--json $NULLDEV (/dev/null) succeeds"
ok $([ -c "$NULLDEV" ] && echo 0 || echo 1) "$NULLDEV is still a character device"

# a FIFO gets the data, in place
mkfifo "$T/fifo"
timeout 20 cat "$T/fifo" > "$T/from_fifo" &  # bounded: a regression replacing the FIFO would leave it waiting
reader=$!
"$BIN" replay --json "$T/fifo" "$T/trace.txt" > /dev/null; ok $? "--json FIFO succeeds"
wait $reader
ok $([ -p "$T/fifo" ] && echo 0 || echo 1) "the FIFO is still a FIFO"
ok $(contains "$(cat "$T/from_fifo")" '"allocated_bytes.all.peak": 512') "its reader got the JSON"

# a symlink stays a link; its target gets the content (also through a dangling link)
echo old > "$T/target.json"
ln -s target.json "$T/link.json"
"$BIN" replay --json "$T/link.json" "$T/trace.txt" > /dev/null; ok $? "--json SYMLINK succeeds"
ok $([ -L "$T/link.json" ] && echo 0 || echo 1) "the link is still a link"
ok $(contains "$(cat "$T/target.json")" '"allocated_bytes.all.peak": 512') "its target holds the JSON"
ln -s new.json "$T/dangling.json"
"$BIN" replay --json "$T/dangling.json" "$T/trace.txt" > /dev/null
ok $([ -L "$T/dangling.json" ] && [ -f "$T/new.json" ] && echo 0 || echo 1) "a dangling link creates its target and stays a link"

# refused, with the reason, exit 2, nothing created: cases that hold under root too
out=$("$BIN" replay --json "$T/missing/r.json" "$T/trace.txt" 2>&1 > /dev/null); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "a path under a missing directory exits 2 (exit $rc)"
ok $(contains "$out" "$T/missing/r.json: cannot write: directory $T/missing: No such file or directory") "and names the path and the reason ($out)"
ok $([ ! -e "$T/missing" ] && echo 0 || echo 1) "nothing was created"
mkdir "$T/dir"
out=$("$BIN" run --csv "$T/dir" "$T/tiny.yaml" 2>&1 > /dev/null); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "a directory as --csv exits 2 (exit $rc)"
ok $(contains "$out" "$T/dir: cannot write: Is a directory") "and says it is a directory ($out)"
ok $([ -d "$T/dir" ] && [ -z "$(ls -A "$T/dir")" ] && echo 0 || echo 1) "the directory is untouched"

# a read-only file: root may write any file, so this holds only for other users
echo keep > "$T/ro.csv"
chmod 444 "$T/ro.csv"
if [ "$(id -u)" = 0 ]; then
    echo "ok $((n = n + 1)) # SKIP a read-only file is writable by root (running as root)"
else
    out=$("$BIN" run --csv "$T/ro.csv" "$T/tiny.yaml" 2>&1 > /dev/null); rc=$?
    ok $([ $rc = 2 ] && echo 0 || echo 1) "a read-only file is refused with exit 2 (exit $rc)"
    ok $(contains "$out" "$T/ro.csv: cannot write: Permission denied") "with the reason ($out)"
    ok $([ "$(cat "$T/ro.csv")" = keep ] && echo 0 || echo 1) "and left untouched"
fi

# SIGINT and SIGTERM while the CSV's temporary exists (run --csv opens it first; the JSON write then
# waits for a reader of the FIFO): the temporary is removed and the process dies of the signal.
# perl gives the child SIGINT's default action, which a background job of a non-interactive shell lacks.
for pair in INT:2 TERM:15; do
    sig=${pair%:*}
    perl -e '$SIG{INT} = "DEFAULT"; exec @ARGV or die' "$BIN" run --csv "$T/sig.csv" --json "$T/fifo" \
        "$T/tiny.yaml" > /dev/null 2>&1 &
    pid=$!
    i=0
    while [ -z "$(find "$T" -name 'sig.csv.tmp.*')" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
    ok $([ $i -lt 500 ] && echo 0 || echo 1) "SIG$sig: the writer's temporary exists while it runs"
    kill -$sig $pid
    wait $pid 2>/dev/null; rc=$?  # dash reports the signal on stderr
    want=$((128 + ${pair#*:}))
    ok $([ $rc = $want ] && echo 0 || echo 1) "SIG$sig: the writer dies of the signal (exit $rc, want $want)"
    ok $(no_temporaries) "SIG$sig: no temporary is left behind"
    ok $([ ! -e "$T/sig.csv" ] && echo 0 || echo 1) "SIG$sig: and no result file"
done

# a full disk gives its reason
out=$("$BIN" replay --json "$FULLDEV" "$T/trace.txt" 2>&1 > /dev/null); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "--json $FULLDEV (/dev/full) exits 2 (exit $rc)"
ok $(contains "$out" "$FULLDEV: cannot write: No space left on device") "with the reason ($out)"
ok $([ -c "$FULLDEV" ] && echo 0 || echo 1) "$FULLDEV is still a character device"
ok $(no_temporaries) "no temporary anywhere in the test directory"
done_testing
