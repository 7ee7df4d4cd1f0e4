#!/bin/sh
# cli_devices_nvml.sh: the GPUs of a machine, without one: `oomlab devices` through the NVML stand-in
# (tests/standin/nvml_standin.c) lists each GPU with its memory, other processes, modes, telemetry and
# the profile sim:gpuN takes, and says why when there is no NVML or its driver fails; sim:gpuN runs
# exactly as the profile it maps to; cuda:auto picks the GPU with the most free memory (as the CUDA
# ordinal CUDA_VISIBLE_DEVICES gives it), refuses with every GPU's reason when none has --min-free,
# waits with --wait-for-gpu and gives up with a clear message; bad option values exit 2.
BIN=${OOMLAB_BIN:-build/oomlab}
STANDIN=${OOMLAB_STANDINS:-build/tests}/libnvml-standin.so
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"
if [ ! -f "$STANDIN" ]; then echo "1..0 # SKIP $STANDIN is not built (make tests)"; exit 0; fi
export OOMLAB_NVML="$STANDIN" OOMLAB_NVML_STANDIN="$T/gpus"
unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER

cat > "$T/gpus" <<'G'
name=NVIDIA GeForce RTX 4090;uuid=GPU-aaaa;total=25757220864;used=1073741824;procs=11:536870912;mig=0;mode=0;temp=61;power=310000;sm=2520;mem=10501;reasons=4;ecc=0:0
name=NVIDIA GeForce RTX 5090;uuid=GPU-bbbb;total=34190917632;used=2147483648;procs=12:1073741824,13:1073741824;mig=0;mode=0
G
out=$("$BIN" devices); rc=$?
ok $rc "oomlab devices with two GPUs exits 0"
ok $(contains "$out" "GPUs (NVML): 2; cuda:auto takes the usable one with the most free memory") "counts them"
ok $(contains "$out" "0  NVIDIA GeForce RTX 4090  GPU-aaaa") "GPU 0: name and UUID"
ok $(contains "$out" "memory (measured): 23.99 GiB total, 22.99 GiB free, 1024.00 MiB used; other processes: 1 (512.00 MiB); MIG off; compute mode default") "its memory, the other process, its modes"
ok $(contains "$out" "now (measured): 61 C, 310000 mW, SM 2520 MHz, memory 10501 MHz; clock events: sw power cap; ECC errors 0 corrected, 0 uncorrected") "its telemetry"
ok $(contains "$out" "n/a, n/a, SM n/a, memory n/a; clock events: unknown") "what GPU 1 does not report is n/a"
ok $(contains "$out" "simulated as sim:gpu1: profile rtx5090") "and the profile each maps to"
ok $(contains "$out" "host topology (hwloc): ") "the host's topology from hwloc"
if command -v taskset > /dev/null; then
    out=$(taskset -c 0 "$BIN" devices)
    ok $(contains "$out" "(1 this process may use)") "bound to one CPU, it counts one core it may use (the host device's kernel threads)"
fi

out=$(OOMLAB_NVML=/nonexistent/libnvidia-ml.so.1 "$BIN" devices); rc=$?
ok $([ $rc = 0 ] && contains "$out" "GPUs (NVML): NVML unavailable: /nonexistent/libnvidia-ml.so.1: cannot open shared object file" | grep -q 0 && echo 0 || echo 1) "no NVML: devices still exits 0 and says why"
out=$(OOMLAB_NVML_STANDIN=$T/none "$BIN" devices)
ok $(contains "$out" "NVML unavailable: nvmlInit: Driver Not Loaded") "a driver that is not loaded: NVML's own words"

# sim:gpuN runs as the profile it maps to
printf 'name: s\ntitle: t\nsource: tests\nmodel: { preset: tiny-transformer }\njob: { batch_size: 2, seq_len: 32 }\nvariants:\n  before: { expect: { oom: false } }\n' > "$T/s.yaml"
"$BIN" run --device sim:gpu1 --csv "$T/a.csv" "$T/s.yaml" > "$T/a.txt"; rc=$?
"$BIN" run --device sim:rtx5090 --csv "$T/b.csv" "$T/s.yaml" > /dev/null
ok $([ $rc = 0 ] && cut -d, -f3- "$T/a.csv" | cmp -s - "$(cut -d, -f3- "$T/b.csv" > "$T/b.cut"; echo "$T/b.cut")" && echo 0 || echo 1) "sim:gpu1 gives the rtx5090 profile's figures"
ok $(contains "$(cat "$T/a.txt")" "device: sim:rtx5090 (31.51 GiB total") "and names the profile it took"
err=$("$BIN" run --device sim:gpu7 "$T/s.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && contains "$err" "no GPU 7: NVML sees 2" | grep -q 0 && echo 0 || echo 1) "sim:gpu7 on two GPUs: exit 2 ($err)"
echo 'name=NVIDIA GeForce GTX 1080;total=8589934592;used=0' > "$T/odd"
err=$(OOMLAB_NVML_STANDIN=$T/odd "$BIN" run --device sim:gpu0 "$T/s.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && contains "$err" "GPU 0 (NVIDIA GeForce GTX 1080) matches no profile" | grep -q 0 && echo 0 || echo 1) "a GPU no profile matches: exit 2 saying so"

# cuda:auto: the 5090 has the most free memory; with CUDA_VISIBLE_DEVICES=1,0 it is cuda:0
err=$("$BIN" run --device cuda:auto "$T/s.yaml" 2>&1)
ok $(contains "$err" "cuda:1 unavailable") "cuda:auto opens cuda:1, the GPU with the most free memory ($err)"
err=$(CUDA_VISIBLE_DEVICES=1,0 "$BIN" run --device cuda:auto "$T/s.yaml" 2>&1)
ok $(contains "$err" "cuda:0 unavailable") "the same GPU is cuda:0 under CUDA_VISIBLE_DEVICES=1,0"
err=$(CUDA_VISIBLE_DEVICES=GPU-aaaa "$BIN" run --device cuda:auto "$T/s.yaml" 2>&1)
ok $(contains "$err" "cuda:0 unavailable") "only the 4090 visible by UUID: cuda:0"
err=$("$BIN" run --device cuda:auto --min-free 30GiB "$T/s.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "--min-free 30GiB, no GPU has it: exit 2"
ok $(contains "$err" "cuda:auto: no usable GPU (--wait-for-gpu waits for one): GPU 0 (NVIDIA GeForce RTX 4090): 22.99 GiB free, below the 30.00 GiB asked for GPU 1 (NVIDIA GeForce RTX 5090): 29.84 GiB free, below the 30.00 GiB asked for") "and says why for each GPU"
err=$("$BIN" run --device cuda:auto --min-free 30GiB --wait-for-gpu 300ms --poll 100ms "$T/s.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && contains "$err" "no usable GPU after waiting" | grep -q 0 && echo 0 || echo 1) "waiting 300 ms in vain: exit 2"
ok $(contains "$err" "oomlab: waiting for a GPU (0 s of 0 s): GPU 0 (NVIDIA GeForce RTX 4090): 22.99 GiB free") "each poll says what it waits for"
for bad in "--wait-for-gpu 10" "--poll 0s" "--min-free lots"; do
    # shellcheck disable=SC2086
    err=$("$BIN" run --device cuda:auto $bad "$T/s.yaml" 2>&1); rc=$?
    ok $([ $rc = 2 ] && contains "$err" "${bad%% *}:" | grep -q 0 && echo 0 || echo 1) "$bad: exit 2 naming the option ($err)"
done
done_testing
