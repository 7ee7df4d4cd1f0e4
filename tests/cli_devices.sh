#!/bin/sh
# cli_devices.sh: the device a scenario names decides its cuBLAS workspace the same way for `oomlab
# program` and `oomlab run` (a bare sim:SIZE has the default profile's architecture: 32 MiB; a T4
# 8,519,680 B; the host PyTorch's pre-Hopper default; job.cublas_workspace wins everywhere); a bare
# size says whose architecture it has; the host reports kernel time and wall clock both; and
# `oomlab devices` lists what each kind can do.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

# scenario DEVICE [JOB-EXTRA]: a tiny job on DEVICE
scenario() {
    printf 'name: ws\ntitle: t\nsource: tests\ndevice: %s\nmodel: { preset: tiny-transformer }\njob: { batch_size: 2, seq_len: 32%s }\nvariants:\n  before: { expect: { oom: false } }\n' "$1" "$2" > "$T/s.yaml"
}
# the cuBLAS workspace the op program allocates, and the workspace bytes at the run's peak
program_ws() { "$BIN" program "$T/s.yaml" | awk '$1 == "alloc" && $5 == "workspace" && $6 == "cublas_workspace" { print $3; exit }'; }
run_ws() { "$BIN" run --csv "$T/r.csv" "$@" "$T/s.yaml" > "$T/r.txt" && awk -F, 'NR == 2 { print $20 }' "$T/r.csv"; }

check() { # DEVICE JOB-EXTRA WANT WHAT
    scenario "$1" "$2"
    p=$(program_ws); r=$(run_ws)
    ok $([ "$p" = "$3" ] && [ "$r" = "$3" ] && echo 0 || echo 1) "$4: program allocates $p B, run holds $r B (want $3)"
}
check sim:24GiB "" 33554432 "sim:24GiB has the rtx5090's 32 MiB cuBLAS workspace"
check sim:t4 "" 8519680 "sim:t4 has Turing's 8,519,680 B"
check sim:h100 "" 33554432 "sim:h100 has Hopper's 32 MiB"
check sim:24GiB ", cublas_workspace: 4MiB" 4194304 "job.cublas_workspace 4MiB wins on sim:24GiB"
check sim:t4 ", cublas_workspace: 4MiB" 4194304 "and on a profile"
check host:1GiB "" 8519680 "the host has PyTorch's default before Hopper"

scenario sim:t4 ""
r=$(run_ws --device sim:24GiB)
ok $([ "$r" = 33554432 ] && echo 0 || echo 1) "--device sim:24GiB over a sim:t4 scenario: the run takes the new device's workspace ($r)"

scenario sim:24GiB ""
"$BIN" run "$T/s.yaml" > "$T/r.txt"
ok $(contains "$(cat "$T/r.txt")" "device: sim:24GiB (rtx5090 architecture: its rates, kernel-time calibration, cuBLAS workspace and 426.00 MiB CUDA context; 24.00 GiB total, modelled") "the run header says whose architecture a bare size has"
ok $(contains "$("$BIN" program "$T/s.yaml" | head -2)" "# device sim:24GiB (rtx5090 architecture: its rates, kernel-time calibration, cuBLAS workspace and 426.00 MiB CUDA context), cuBLAS workspace 33554432 B per stream") "so does the program's"

scenario host:1GiB ""
"$BIN" run "$T/s.yaml" > "$T/r.txt"
ok $(tr -s ' \n' '  ' < "$T/r.txt" | grep -q "measured: median of 1 steps' training kernels by CLOCK_MONOTONIC around each CPU kernel, [0-9.]* s; range [0-9.-]* s; wall clock [0-9.]* s" && echo 0 || echo 1) "a host run shows kernel time by its clock and the wall clock beside it"

out=$("$BIN" run --device sim:400MiB "$T/s.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "--device sim:400MiB is bad input (exit $rc)"
ok $(contains "$out" "device sim:400MiB: a 400.00 MiB card cannot hold the 426.00 MiB CUDA context") "and says why ($out)"

out=$("$BIN" devices)
ok $(contains "$out" "sim:SIZE (a card of that total with the rtx5090's rates, kernel-time calibration, cuBLAS workspace and 426.00 MiB CUDA context); @cudaX.Y after either takes that CUDA version's context") "devices: what a bare sim size is"
ok $(contains "$out" "figures modelled; kernels timed, not run; segments placed by the deterministic sim policy") "devices: the sim's capabilities"
ok $(contains "$out" "figures measured; kernels run and timed one by one; segments placed by the deterministic sim policy") "devices: the host's"
ok $(contains "$out" "figures measured; kernels run asynchronously, timed when they end; segment addresses from the driver") "devices: cuda's"

# The BLAS is loaded at run time, by the host device only: a sim run or a replay never maps it.
libs=$(ldd "$BIN")
ok $(echo "$libs" | grep -qE 'openblas|libblas|quadmath|gfortran' && echo 1 || echo 0) "the binary links no BLAS nor its Fortran runtime"
scenario sim:24GiB ""
LD_DEBUG=files "$BIN" run "$T/s.yaml" > /dev/null 2> "$T/ld.txt"
ok $(grep -q 'file=libopenblas' "$T/ld.txt" && echo 1 || echo 0) "a sim run does not load the BLAS"
scenario host:1GiB ""
LD_DEBUG=files "$BIN" run "$T/s.yaml" > /dev/null 2> "$T/ld.txt"
ok $(grep -q 'file=.*libopenblas.*dynamically loaded by' "$T/ld.txt" && echo 0 || echo 1) "a host run loads it when it opens the device"
out=$(OOMLAB_BLAS=/nonexistent/libblas.so "$BIN" run "$T/s.yaml" 2>&1); rc=$?
ok $([ $rc = 3 ] && echo 0 || echo 1) "without a BLAS a host run is a device error (exit $rc)"
ok $(contains "$out" "device host:1GiB: cannot load the BLAS: /nonexistent/libblas.so: cannot open shared object file") "naming the library and why ($out)"
out=$(OOMLAB_BLAS=libc.so.6 "$BIN" run "$T/s.yaml" 2>&1)
ok $(contains "$out" "cannot load the BLAS: libc.so.6 has no cblas_sgemm") "a library without cblas_sgemm is refused ($out)"
out=$(OOMLAB_BLAS=/nonexistent/libblas.so "$BIN" devices)
ok $(echo "$out" | grep -qE '^  host +no .*unavailable: cannot load the BLAS: /nonexistent/libblas.so' && echo 0 || echo 1) "devices: the host unavailable, and why"
done_testing
