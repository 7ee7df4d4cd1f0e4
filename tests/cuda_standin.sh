#!/bin/sh
# cuda_standin.sh: the CUDA plugin's own logic without a GPU. The CUDA runtime, cuBLAS and cuDNN
# stand-ins (tests/standin/) are put in place of the real libraries with LD_LIBRARY_PATH, serving
# device memory and the driver's virtual-memory calls from host memory: `oomlab devices` finds the
# stand-in's GPU, or says the runtime's own words when there is none; a replay on cuda:0 allocates its
# segments with cudaMalloc (a 40 GiB request is tried twice, as PyTorch retries after releasing the cache,
# then OOMs with the GPU's total in PyTorch's message); --capacity as a share and as a size caps it;
# expandable segments reserve address space once and map 2 MiB granules exactly as reserved memory grows;
# cudaMalloc failing with another error is a device error (exit 3); cuda:auto opens the GPU NVML chose;
# a stress run reads NVML's telemetry of the GPU (matched by UUID) before and after, and its GEMM load
# reaches cuBLAS; and a kernel launch fails saying it cannot run here.
BIN=${OOMLAB_BIN:-build/oomlab}
DIR=${OOMLAB_STANDINS:-build/tests}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"
PLUGIN=$(dirname "$BIN")/oomlab-cuda.so
if [ ! -f "$PLUGIN" ] || [ ! -f "$DIR/cuda-standin/libcudart.so.13" ]; then
    echo "1..0 # SKIP the CUDA plugin or its stand-ins are not built (needs nvcc)"; exit 0
fi
export LD_LIBRARY_PATH="$DIR/cuda-standin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OOMLAB_CUDA_STANDIN="$T/gpus"
GPU='name=NVIDIA GeForce RTX 5090;total=34190917632;cc=12.0;uuid=0123456789abcdef0123456789abcdef'
echo "$GPU" > "$T/gpus"
csv_col() { awk -F, -v c="$1" 'NR == 2 { print $c }' "$T/r.csv"; }

out=$("$BIN" devices)
ok $(contains "$out" "cuda yes see cuda:N 1 GPU through oomlab-cuda.so: cuda:0 .. cuda:0") "devices: the stand-in's GPU through the plugin"
out=$(OOMLAB_CUDA_STANDIN=$T/none "$BIN" devices)
ok $(contains "$out" "cuda no - unavailable: no CUDA-capable device is detected") "no GPU: the runtime's own words"

printf 'step 1 samples 1\nphase forward\nalloc a 64MiB\nalloc b 3GiB\nfree a\nfree b\n' > "$T/fits.trace"
"$BIN" replay --device cuda:0 --csv "$T/r.csv" "$T/fits.trace" > "$T/out.txt"; rc=$?
ok $rc "a trace replays on cuda:0"
ok $([ "$(csv_col 5)" = measured ] && [ "$(csv_col 7)" = 3288334336 ] && echo 0 || echo 1) "measured, 3 GiB + 64 MiB reserved in two segments ($(csv_col 7))"
ok $(contains "$(cat "$T/out.txt")" "device: cuda:0 (NVIDIA GeForce RTX 5090, sm_120; 31.84 GiB total, measured)") "the device names the GPU, its architecture and cudaMemGetInfo's total"

printf 'step 1 samples 1\nphase forward\nalloc a 64MiB\nalloc b 40GiB\nfree a\n' > "$T/oom.trace"
OOMLAB_CUDA_STANDIN_LOG=$T/log "$BIN" replay --device cuda:0 "$T/oom.trace" > "$T/out.txt"
ok $(contains "$(cat "$T/out.txt")" "Tried to allocate 40.00 GiB. GPU 0 has a total capacity of 31.84 GiB of which 31.78 GiB is free") "a 40 GiB request OOMs with PyTorch's message"
ok $([ "$(grep -c '^cudaMalloc 42949672960$' "$T/log")" = 2 ] && echo 0 || echo 1) "after cudaMalloc failed twice: the free-and-retry (log: $(tr '\n' ' ' < "$T/log"))"
"$BIN" replay --device cuda:0 --capacity 50% "$T/oom.trace" > "$T/out.txt"
ok $(contains "$(cat "$T/out.txt")" "GPU 0 has a total capacity of 15.92 GiB") "--capacity 50%: half the GPU's total"
printf 'step 1 samples 1\nphase forward\nalloc a 3GiB\nalloc b 2GiB\n' > "$T/cap.trace"
rm -f "$T/log"
OOMLAB_CUDA_STANDIN_LOG=$T/log "$BIN" replay --device cuda:0 --capacity 4GiB "$T/cap.trace" > "$T/out.txt"
ok $(contains "$(cat "$T/out.txt")" "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 4.00 GiB") "--capacity 4GiB: the second segment is refused under the cap"
ok $([ "$(grep -c '^cudaMalloc 2147483648$' "$T/log")" = 0 ] && echo 0 || echo 1) "without asking the driver for it"

rm -f "$T/log"
OOMLAB_CUDA_STANDIN_LOG=$T/log "$BIN" replay --device cuda:0 --alloc-conf expandable_segments:True --csv "$T/r.csv" "$T/fits.trace" > /dev/null
maps=$(awk '$1 == "cuMemMap" { n++; s += $2 } END { printf "%d %.0f", n, s }' "$T/log")
ok $([ "$(grep -c '^cuMemAddressReserve' "$T/log")" = 1 ] && echo 0 || echo 1) "expandable segments: one address-space reservation"
ok $([ "$maps" = "1570 $(csv_col 7)" ] && echo 0 || echo 1) "2 MiB granules mapped, as many bytes as reserved ($maps; reserved $(csv_col 7))"
ok $([ "$(grep -c '^cuMemUnmap' "$T/log")" = 1570 ] && [ "$(grep -c '^cuMemRelease' "$T/log")" = 1570 ] && echo 0 || echo 1) "all unmapped and released when the device closes"

printf '%s\nfail=cudaMalloc:2\n' "$GPU" > "$T/gpus"
err=$("$BIN" replay --device cuda:0 "$T/fits.trace" 2>&1); rc=$?
ok $([ $rc = 3 ] && contains "$err" "cuda:0: cudaMalloc(3221225472): unspecified launch failure (injected by the CUDA stand-in)" | grep -q 0 && echo 0 || echo 1) "cudaMalloc failing otherwise than OOM: a device error, exit 3 ($err)"
echo "$GPU" > "$T/gpus"

printf 'name=NVIDIA GeForce RTX 5090;uuid=GPU-a;total=34190917632;used=0\n' > "$T/nvml"
err=$(OOMLAB_NVML=/nonexistent/libnvidia-ml.so.1 "$BIN" replay --device cuda:auto "$T/fits.trace" 2>&1); rc=$?
ok $([ $rc = 2 ] && contains "$err" "cuda:auto: NVML unavailable" | grep -q 0 && echo 0 || echo 1) "no NVML: cuda:auto cannot choose (exit $rc)"
OOMLAB_NVML="$DIR/libnvml-standin.so" OOMLAB_NVML_STANDIN="$T/nvml" "$BIN" replay --device cuda:auto --csv "$T/r.csv" "$T/fits.trace" > /dev/null; rc=$?
ok $([ $rc = 0 ] && [ "$(csv_col 4)" = '"cuda:0"' ] && echo 0 || echo 1) "cuda:auto: NVML's choice opened through the plugin ($(csv_col 4))"

# stress on the GPU: NVML's readings of it (the same UUID) before and after; the burn's GEMM reaches cuBLAS
printf 'name=NVIDIA GeForce RTX 5090;uuid=GPU-01234567-89ab-cdef-0123-456789abcdef;total=34190917632;used=0;temp=45;power=120000;sm=2520;mem=14001;reasons=4;ecc=0:0\n' > "$T/nvml"
printf 'name: f\ntitle: t\nkind: fill\ndevice: cuda:0\nfill:\n  sizes: { distribution: fixed, size: 1GiB }\n' > "$T/fill.yaml"
out=$(OOMLAB_NVML="$DIR/libnvml-standin.so" OOMLAB_NVML_STANDIN="$T/nvml" "$BIN" stress --json "$T/st.json" "$T/fill.yaml" 2>&1); rc=$?
ok $([ $rc = 0 ] && contains "$out" "GPU telemetry (measured, NVML), start -> end: 45 -> 45 C, 120000 -> 120000 mW, SM 2520 -> 2520 MHz, memory 14001 -> 14001 MHz, clock events sw power cap -> sw power cap, ECC errors corrected 0 -> 0, uncorrected 0 -> 0" | grep -q 0 && echo 0 || echo 1) "stress on cuda:0: the GPU's telemetry, start and end"
ok $(grep -q '"temperature_c": 45' "$T/st.json" && echo 0 || echo 1) "and in the JSON"
out=$(OOMLAB_NVML=/nonexistent/libnvidia-ml.so.1 "$BIN" stress "$T/fill.yaml" 2>&1)
ok $(contains "$out" "GPU telemetry: none (NVML unavailable: /nonexistent/libnvidia-ml.so.1") "without NVML: it says there is none, and why"
printf 'name: c\ntitle: t\nkind: churn\ndevice: cuda:0\nchurn:\n  sizes: { distribution: fixed, size: 1MiB }\n  ops: 100\n  burn_every: 10\n  burn_size: 256\n' > "$T/burn.yaml"
err=$("$BIN" stress "$T/burn.yaml" 2>&1); rc=$?
ok $([ $rc = 3 ] && contains "$err" "GEMMs cannot run in the cuBLAS stand-in" | grep -q 0 && echo 0 || echo 1) "churn's GEMM load goes to cuBLAS (exit $rc: $err)"

printf 'name: s\ntitle: t\nsource: tests\nmodel: { preset: tiny-transformer }\njob: { batch_size: 2, seq_len: 32 }\nvariants:\n  before: { expect: { oom: false } }\n' > "$T/s.yaml"
err=$("$BIN" run --device cuda:0 "$T/s.yaml" 2>&1); rc=$?
ok $([ $rc = 3 ] && contains "$err" "kernel launches cannot run in the CUDA stand-in (no GPU here)" | grep -q 0 && echo 0 || echo 1) "a kernel launch fails saying it cannot run here (exit $rc)"
done_testing
