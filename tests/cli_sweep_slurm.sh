#!/bin/sh
# cli_sweep_slurm.sh: `oomlab sweep --slurm --submit --wait` on a real Slurm: munged, slurmctld and slurmd
# from Debian's packages (slurm-wlm: slurmctld slurmd slurm-client munge, which scripts/install-deps
# installs) started on localhost with a minimal slurm.conf in a temporary directory (the machine's own
# CPUs and memory as `slurmd -C` reads them, no accounting), a job array of 6 tasks run by it, merged,
# and compared byte for byte with the same sweep run here; the daemons are stopped on exit. Skipped,
# with the reason, when not root or a package is missing.
BIN=${OOMLAB_BIN:-build/oomlab}
BIN=$(cd "$(dirname "$BIN")" && pwd -P)/$(basename "$BIN")
. "$(dirname "$0")/tap.shlib"
skip_all() { echo "1..0 # SKIP $1"; exit 0; }
[ "$(id -u)" = 0 ] || skip_all "needs root to run slurmctld, slurmd and munged"
for p in munged mungekey slurmctld slurmd sbatch sinfo; do
    command -v $p > /dev/null 2>&1 || [ -x /usr/sbin/$p ] ||
        skip_all "$p not found: scripts/install-deps installs slurmctld slurmd slurm-client munge"
done
PATH=$PATH:/usr/sbin
T=$(mktemp -d)
chmod 700 "$T"
stop() {
    for d in slurmd slurmctld munged; do
        [ -s "$T/$d.pid" ] && kill "$(cat "$T/$d.pid")" 2> /dev/null
    done
    sleep 0.2
    [ -n "$KEEP" ] || rm -rf "$T"
}
trap stop EXIT
trap 'exit 1' INT TERM HUP

# munge with a key and socket of its own (it refuses root without --force)
mungekey -c -k "$T/munge.key" || skip_all "mungekey cannot make a key"
munged --force --socket="$T/munge.sock" --key-file="$T/munge.key" --pid-file="$T/munged.pid" \
    --log-file="$T/munged.log" --seed-file="$T/munged.seed" 2> "$T/munged.err"
ok $? "munged starts $(head -c 300 "$T/munged.err")"

# ports from the test's pid, so two runs on one machine do not meet
port=$((20000 + $$ % 20000))
node=$(slurmd -C | head -1 | sed 's/^NodeName=[^ ]*/NodeName=localhost/')
mkdir -p "$T/state" "$T/spool"
cat > "$T/slurm.conf" <<CONF
ClusterName=oomlabtest
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge.sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# start array tasks as soon as CPUs free up (by default Slurm batches its scheduling by seconds)
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SwitchType=switch/none
MpiDefault=none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
$node State=UNKNOWN
PartitionName=oomlab Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$T/slurm.conf"
slurmctld -i -f "$SLURM_CONF" 2> "$T/slurmctld.err"
ok $? "slurmctld starts $(head -c 300 "$T/slurmctld.err")"
slurmd -N localhost -f "$SLURM_CONF" 2> "$T/slurmd.err"
ok $? "slurmd starts $(head -c 300 "$T/slurmd.err")"
state=""
for i in $(seq 50); do
    state=$(sinfo -h -n localhost -o %T 2> /dev/null)
    [ "$state" = idle ] && break
    sleep 0.2
done
ok $([ "$state" = idle ] && echo 0 || echo 1) "the node is idle ($state) $(tail -3 "$T/slurmctld.log" 2> /dev/null)"

# the same sweep through Slurm and here: 2 scenarios x 3 values
args="--set job.steps=1,2,3 scenarios/unreleased_gradients.yaml scenarios/vae_decode_burst.yaml"
# (a minute at most: a job that Slurm never starts would leave sbatch --wait waiting)
timeout 60 "$BIN" sweep --slurm --submit --wait --out "$T/slurm" --json "$T/slurm.json" --csv "$T/slurm.csv" $args \
    > "$T/slurm.txt" 2> "$T/slurm.err"; rc=$?
ok $([ $rc = 0 ] && echo 0 || echo 1) "sweep --slurm --submit --wait exits 0 (got $rc) $(head -c 400 "$T/slurm.err")"
job=$(grep -x '[0-9][0-9]*' "$T/slurm.err" | head -1)
ok $([ -n "$job" ] && grep -qx '#SBATCH --array=0-5' "$T/slurm/sweep.sbatch" && echo 0 || echo 1) \
    "it submitted a job array of 6 tasks (job $job)"
ok $([ $(grep -c "JobId=${job}_[0-5]([0-9]*) done" "$T/slurmctld.log") = 6 ] && echo 0 || echo 1) \
    "slurmctld ran its 6 array tasks $(grep "JobId=${job}_" "$T/slurmctld.log" | tail -2)"
ok $([ $(ls "$T/slurm/results" | grep -c '^task-[0-5]\.json$') = 6 ] && echo 0 || echo 1) \
    "every array task wrote its results"
ok $(grep -q 'oomlab-sweep\|forecaster' "$T/slurm/logs/task-0.log" 2> /dev/null && echo 0 || echo 1) \
    "Slurm kept each task's output in DIR/logs"
"$BIN" sweep -j 2 --out "$T/local" --json "$T/local.json" --csv "$T/local.csv" $args > "$T/local.txt" 2> /dev/null
for f in txt json csv; do
    ok $([ -s "$T/local.$f" ] && cmp -s "$T/slurm.$f" "$T/local.$f" && echo 0 || echo 1) \
        "the merged $f is the same, run on Slurm or here"
done
"$BIN" merge "$T/slurm" > "$T/merge.txt" 2> /dev/null
ok $(cmp -s "$T/merge.txt" "$T/local.txt" && echo 0 || echo 1) "oomlab merge of the Slurm sweep prints the same table"
done_testing
