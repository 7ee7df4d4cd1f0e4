#!/bin/sh
# cli_sweep.sh: `oomlab sweep` and `oomlab merge` run here: the tasks a sweep expands to (scenarios x
# devices x --set values), -j 2, the merged table, CSV and JSON equal to `oomlab run` of the same jobs
# byte for byte, a --set value equal to the same value written in the file, bad --set keys and values
# (exit 2, nothing written), a failed and a missing task named by number, and result files that are
# whole (no temporaries left, a task's JSON equal to the merge of it alone).
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"
S=scenarios/unreleased_gradients.yaml
V=scenarios/vae_decode_burst.yaml

# expansion: 2 scenarios x 2 devices x 2 x 2 values = 16 tasks, the last --set varying fastest
"$BIN" sweep -j 2 --out "$T/a" --device sim:t4,sim:rtx4090 --set job.seq_len=512,1024 --set model.layers=2,3 \
    --csv "$T/a.csv" "$S" "$V" > "$T/a.txt" 2> "$T/a.err"; rc=$?
ok $([ $rc -le 1 ] && echo 0 || echo 1) "a sweep of 16 tasks runs with -j 2 (exit $rc) $(head -c 300 "$T/a.err")"
ok $(contains "$(cat "$T/a.err")" "16 tasks in") "it says it has 16 tasks"
ok $([ $(grep -c '"task":' "$T/a/tasks.json") = 16 ] && echo 0 || echo 1) "tasks.json holds 16 tasks"
ok $([ $(ls "$T/a/results" | grep -c '^task-[0-9]*\.json$') = 16 ] && echo 0 || echo 1) "each wrote DIR/results/task-N.json"
ok $([ -z "$(find "$T/a" -name '*.tmp.*')" ] && echo 0 || echo 1) "no temporary file is left behind"
ok $([ $(grep -c '^"forecaster-backward-oom' "$T/a.csv") = 32 ] && [ $(grep -c '^"vae-decode-burst' "$T/a.csv") = 16 ] &&
    echo 0 || echo 1) "the CSV has every variant of every task (32 + 16 rows)"
first=$(sed -n 2p "$T/a.csv" | cut -d, -f1); last=$(tail -1 "$T/a.csv" | cut -d, -f1)
ok $([ "$first" = '"forecaster-backward-oom job.seq_len=512 model.layers=2 @sim:t4"' ] &&
    [ "$last" = '"vae-decode-burst job.seq_len=1024 model.layers=3 @sim:rtx4090"' ] && echo 0 || echo 1) \
    "tasks in order, each named by its values and device ($first ... $last)"
"$BIN" merge "$T/a" > "$T/a2.txt" 2>&1
ok $(cmp -s "$T/a.txt" "$T/a2.txt" && echo 0 || echo 1) "oomlab merge prints the table the sweep printed"

# a --set value runs as the same value written in the file
sed -e 's/^  seq_len: 1024/  seq_len: 512/' -e 's/^  layers: 3/  layers: 2/' "$S" > "$T/edited.yaml"
"$BIN" run --device sim:rtx4090 --csv "$T/edited.csv" "$T/edited.yaml" > /dev/null 2>&1
grep '^"forecaster-backward-oom job.seq_len=512 model.layers=2 @sim:rtx4090"' "$T/a.csv" | cut -d, -f2- > "$T/set.rows"
tail -n +2 "$T/edited.csv" | cut -d, -f2- > "$T/edited.rows"
ok $([ -s "$T/set.rows" ] && cmp -s "$T/set.rows" "$T/edited.rows" && echo 0 || echo 1) \
    "--set job.seq_len=512 --set model.layers=2 equals the file edited to say so"

# one device, no --set: the merged table, CSV and JSON are oomlab run's, byte for byte
"$BIN" sweep -j 2 --out "$T/b" --device sim:rtx4090 --json "$T/b.json" --csv "$T/b.csv" scenarios/ > "$T/b.txt" 2>/dev/null
brc=$?
"$BIN" run --device sim:rtx4090 --json "$T/r.json" --csv "$T/r.csv" scenarios/ > "$T/r.txt" 2>/dev/null
rrc=$?
ok $([ $brc = $rrc ] && echo 0 || echo 1) "sweep of scenarios/ exits as run does ($brc, $rrc)"
ok $(cmp -s "$T/b.txt" "$T/r.txt" && echo 0 || echo 1) "its table equals oomlab run's"
ok $(cmp -s "$T/b.csv" "$T/r.csv" && echo 0 || echo 1) "its CSV equals oomlab run's"
sed 's/"command": "sweep"/"command": "run"/' "$T/b.json" > "$T/b-as-run.json"
ok $(cmp -s "$T/b-as-run.json" "$T/r.json" && echo 0 || echo 1) "its JSON equals oomlab run's but for its command"
"$BIN" merge --tap "$T/b" > "$T/b.tap"; trc=$?
"$BIN" run --device sim:rtx4090 --tap scenarios/ > "$T/r.tap" 2>/dev/null
ok $(cmp -s "$T/b.tap" "$T/r.tap" && echo 0 || echo 1) "merge --tap equals run --tap (exit $trc)"

# a task's JSON is whole: the merge of a one-task sweep writes the same bytes
"$BIN" sweep --out "$T/c" --json "$T/c.json" "$S" > /dev/null 2>&1
ok $(cmp -s "$T/c.json" "$T/c/results/task-0.json" && echo 0 || echo 1) "a task's results JSON equals its merge"

# measured figures (the host device runs the kernels) read back whole too: wall-clock times and all
"$BIN" sweep --out "$T/h" --json "$T/h.json" --set job.steps=2 --set job.batch_size=1 scenarios/host/checkpointing.yaml \
    > "$T/h.txt" 2>&1
ok $(cmp -s "$T/h.json" "$T/h/results/task-0.json" && grep -q '"wall_seconds"' "$T/h.json" && echo 0 || echo 1) \
    "a measured host task's JSON equals its merge, wall-clock times included"
ok $(contains "$(cat "$T/h.txt")" "measured") "  and its table says measured"

# bad --set: exit 2, the key or value named, no sweep directory
out=$("$BIN" sweep --out "$T/bad" --set job.batch_sz=4 "$S" 2>&1); rc=$?
ok $([ $rc = 2 ] && [ ! -e "$T/bad" ] && echo 0 || echo 1) "an unknown --set key exits 2, nothing written (exit $rc)"
ok $(contains "$out" "job.batch_sz=4") "  naming the --set ($out)"
ok $(contains "$out" "did you mean 'batch_size'") "  with the key it may mean"
out=$("$BIN" sweep --out "$T/bad" --set job.batch_size=4,abc "$S" 2>&1); rc=$?
ok $([ $rc = 2 ] && [ ! -e "$T/bad" ] && [ $(contains "$out" "with --set job.batch_size=abc") = 0 ] &&
    [ $(contains "$out" "$S:28:15: job.batch_size must be an integer, got 'abc'") = 0 ] && echo 0 || echo 1) \
    "a bad --set value exits 2 naming it and the line of the value it replaces ($out)"
out=$("$BIN" sweep --out "$T/bad" --set 'alloc_conf=expandable_segments:True\,max_split_size_mb:x' "$S" 2>&1); rc=$?
ok $([ $rc = 2 ] && [ $(contains "$out" "invalid value 'x' for max_split_size_mb") = 0 ] && echo 0 || echo 1) \
    "an alloc_conf value keeps its escaped comma and is checked by PyTorch's rules ($out)"
out=$("$BIN" sweep --out "$T/bad" --set job.seq_len=1,,2 "$S" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "an empty --set value exits 2 ($out)"
out=$("$BIN" sweep --out "$T/bad" --device sim:rtx9999 "$S" 2>&1); rc=$?
ok $([ $rc = 2 ] && [ $(contains "$out" "--device sim:rtx9999") = 0 ] && echo 0 || echo 1) "a bad --device exits 2 ($out)"
out=$("$BIN" sweep --out "$T/c" "$S" 2>&1); rc=$?
ok $([ $rc = 2 ] && [ $(contains "$out" "already holds a sweep") = 0 ] && echo 0 || echo 1) \
    "a directory that holds a sweep is not overwritten ($out)"
out=$("$BIN" sweep --task 5 "$T/c" 2>&1); rc=$?
ok $([ $rc = 2 ] && [ $(contains "$out" "has tasks 0 to 0") = 0 ] && echo 0 || echo 1) "--task out of range exits 2 ($out)"

# a task that fails (its job needs more forward passes than allowed) and one whose results are gone
"$BIN" sweep -j 2 --out "$T/f" --max-forwards 5 --set job.steps=1,3 "$S" > "$T/f.txt" 2> "$T/f.err"; rc=$?
ok $([ $rc = 2 ] && [ ! -s "$T/f.txt" ] && echo 0 || echo 1) "a sweep with a failed task exits 2 and prints no table (exit $rc)"
ok $(contains "$(cat "$T/f.err")" "task 1 (forecaster-backward-oom job.steps=3) failed: $S: variant before: the job runs 6 forward passes") \
    "  naming task 1 and its error ($(grep merge "$T/f.err" | head -c 300))"
ok $([ -f "$T/f/results/task-0.json" ] && [ ! -e "$T/f/results/task-1.json" ] && echo 0 || echo 1) \
    "the good task has results, the failed one none"
rm "$T/b/results/task-3.json"
out=$("$BIN" merge --json "$T/m.json" --csv "$T/m.csv" "$T/b" 2>&1); rc=$?
ok $([ $rc = 2 ] && [ ! -e "$T/m.json" ] && [ ! -e "$T/m.csv" ] && echo 0 || echo 1) \
    "merge with a missing task exits 2 and writes no file (exit $rc)"
ok $(contains "$out" "task 3 (") "  naming task 3"
ok $(contains "$out" "1 of $(ls scenarios/*.yaml | wc -l) tasks have no results") "  and how many ($out)"
"$BIN" sweep --task 3 "$T/b" > /dev/null 2>&1
"$BIN" merge "$T/b" > "$T/b3.txt" 2>/dev/null
ok $(cmp -s "$T/b3.txt" "$T/r.txt" && echo 0 || echo 1) "the task run again by hand completes the merge"

# --slurm without --submit: the job array script, one array task per task
"$BIN" sweep --slurm -j 4 --sbatch --partition=debug --out "$T/s" --set job.seq_len=256,512,1024 "$S" 2> "$T/s.err"; rc=$?
ok $([ $rc = 0 ] && [ ! -e "$T/s/results/task-0.json" ] && echo 0 || echo 1) "--slurm writes the script and runs nothing (exit $rc)"
ok $(grep -qx '#SBATCH --array=0-2%4' "$T/s/sweep.sbatch" && echo 0 || echo 1) "  #SBATCH --array=0-2%4"
ok $(grep -qx '#SBATCH --partition=debug' "$T/s/sweep.sbatch" && echo 0 || echo 1) "  with the --sbatch option"
ok $(grep -q "sweep --task \"\$SLURM_ARRAY_TASK_ID\" '$(cd "$T/s" && pwd -P)'" "$T/s/sweep.sbatch" && echo 0 || echo 1) \
    "  each array task runs oomlab sweep --task \$SLURM_ARRAY_TASK_ID DIR"
ok $(contains "$(cat "$T/s.err")" "then run oomlab merge") "  and it says what to do next"
SLURM_ARRAY_TASK_ID=1 sh "$T/s/sweep.sbatch" > /dev/null 2>&1
ok $([ -f "$T/s/results/task-1.json" ] && echo 0 || echo 1) "the script runs a task outside Slurm too"
done_testing
