#!/bin/sh
# cli_misc.sh: the small commands: list (presets with exact parameter counts, faults, fixes, kernels,
# profiles), devices (cuda unavailable here, with the runtime's reason, never a crash), program (the op
# program as text, deterministic), usage errors (exit 2).
BIN=${OOMLAB_BIN:-build/oomlab}
. "$(dirname "$0")/tap.shlib"

out=$("$BIN" list presets); ok $? "list presets"
ok $(contains "$out" "flan-t5-xl           t5              2849757184 params") "flan-t5-xl has 2,849,757,184 parameters"
ok $(contains "$out" "bert-large-uncased   encoder          335141888 params") "bert-large-uncased has 335,141,888"
ok $(contains "$out" "sd-vae               vae               83653863 params") "sd-vae has 83,653,863"
out=$("$BIN" list faults); ok $(contains "$out" "variable_length_fragmentation") "list faults"
out=$("$BIN" list fixes); ok $(contains "$out" "sets PYTORCH_CUDA_ALLOC_CONF expandable_segments:True") "list fixes shows allocator settings"
out=$("$BIN" list kernels); ok $(contains "$out" "flash_fwd") "list kernels"
out=$("$BIN" list profiles); ok $(contains "$out" "rtx5090       31.51 GiB total, 426.00 MiB context, 1792 GB/s") "list profiles: the RTX 5090 as CUDA reports it"
ok $(contains "$out" "v100-16       15.78 GiB total, 426.00 MiB context,  900 GB/s,  125.0 TFLOP/s 16-bit,  15.7 fp32, 80 SMs") "list profiles: the V100 16 GB"
ok $(contains "$out" "kernel-time calibration: Volta, on V100 matmul (zzc0721 torch-performance-test-data #140)") "list profiles: each profile's calibration source"
ok $(contains "$out" "CUDA 11.0 on     PyTorch 1.x, eager module loading: 1.31 GiB CUDA context, 21 us host time per op, 16-bit GEMMs on tensor cores whatever their shape") "list profiles: the software stacks by CUDA version"
out=$("$BIN" list scenarios scenarios/host); ok $? "the host scenarios load"
ok $(contains "$out" "host-checkpointing") "host-checkpointing listed"
ok $(contains "$out" "host-chunked-decode") "host-chunked-decode listed"
"$BIN" list nonsense > /dev/null 2>&1; ok $([ $? = 2 ] && echo 0 || echo 1) "unknown list exits 2"

out=$("$BIN" devices 2>&1); rc=$?
ok $rc "devices exits 0 without a GPU"
ok $(contains "$out" "sim    yes") "sim is available"
ok $(contains "$out" "host   yes") "host is available"
# the host's memory is the kernel's count (MemTotal), or the cgroup v2 limit when lower; hwloc's sum
# of NUMA nodes misses memory on no node on some VMs
ram=$(awk '/^MemTotal:/ { print $2 * 1024 }' /proc/meminfo)
limit=$(cat /sys/fs/cgroup/memory.max 2>/dev/null | grep -x '[0-9]*')
if [ -n "$limit" ] && [ "$limit" -lt "$ram" ]; then want=$limit; src="cgroup limit"; else want=$ram; src=RAM; fi
want=$(awk -v b="$want" 'BEGIN { printf "%.2f GiB", b / 1073741824 }')
ok $(contains "$out" "default half of $want $src") "host capacity: half of $want $src, as /proc/meminfo and the cgroup say"
ok $(echo "$out" | grep -q '^  cuda   no   -            unavailable: ..*' && echo 0 || echo 1) "cuda is unavailable with a reason"
out=$("$BIN" run --device cuda scenarios/vae_decode_burst.yaml 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "running on cuda without a GPU fails cleanly (exit $rc)"
ok $(contains "$out" "cuda:0 unavailable") "and says why ($out)"

p1=$("$BIN" program scenarios/vit_lora_linear_probe.yaml | md5sum)
p2=$("$BIN" program scenarios/vit_lora_linear_probe.yaml | md5sum)
ok $([ "$p1" = "$p2" ] && echo 0 || echo 1) "program output is deterministic"
out=$("$BIN" program scenarios/vit_lora_linear_probe.yaml | head -4)
ok $(contains "$out" "phase load") "program starts with the load phase"
ok $(contains "$out" "alloc t1 3072 s0 param vit.embeddings.cls_token") "ALLOC with bytes, stream, category and tag"
out=$("$BIN" program scenarios/duplicate_dtype_conversion.yaml | grep -m1 '^step ')
ok $([ "$out" = "step 1 samples 128" ] && echo 0 || echo 1) "STEP carries the step's samples: batch 8 x 16 micro-batches ($out)"
"$BIN" program --variant nosuch scenarios/vit_lora_linear_probe.yaml > /dev/null 2>&1
ok $([ $? = 2 ] && echo 0 || echo 1) "unknown variant exits 2"

# the host device needs address space for what it holds, not for the model's addresses: it runs under
# a 2 GiB ulimit -v, and refuses a capacity that leaves the OS less than 10% of the machine
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
printf 'alloc a 64MiB\nalloc b 300MiB\nfree a\nalloc c 30MiB\n' > "$T/host.trace"
# (AddressSanitizer reserves terabytes of shadow address space: under it the limit is left off)
limit=2097152; [ "${OOMLAB_SANITIZE:-0}" = 1 ] && limit=unlimited
out=$( (ulimit -v $limit; "$BIN" replay --device host:512MiB "$T/host.trace") 2>&1); rc=$?
ok $rc "host device under ulimit -v 2 GiB (exit $rc)"
ok $(contains "$out" "(measured)") "and its figures are measured"
out=$("$BIN" replay --device host:100% "$T/host.trace" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "host:100% is refused: exit 2 (got $rc)"
ok $(contains "$out" "is more than 90% of this machine's") "and says why ($out)"

# the basics: --version, --help on every command (exit 0), a man page and completions from the same table
out=$("$BIN" --version); ok $? "--version exits 0"
ok $(echo "$out" | grep -q '^oomlab [0-9][0-9.]*' && echo 0 || echo 1) "--version names the release ($out)"
commands="run replay fit check advise sweep merge program devices list help"
for c in $commands; do
    "$BIN" $c --help > "$T/help" 2>&1; ok $? "oomlab $c --help exits 0"
    wide=$(awk 'length > 100' "$T/help" | head -1)
    ok $([ -z "$wide" ] && echo 0 || echo 1) "and fits 100 columns${wide:+ (not: $wide)}"
done
"$BIN" help --man > "$T/oomlab.1"; ok $? "help --man"
ok $(grep -c '^\.SS ' "$T/oomlab.1" | grep -qx $(echo $commands | wc -w) && echo 0 || echo 1) "the man page has a section per command"
if command -v groff > /dev/null; then
    warn=$(groff -man -Tutf8 -ww -z "$T/oomlab.1" 2>&1)
    ok $([ -z "$warn" ] && echo 0 || echo 1) "groff renders it without a warning ($warn)"
fi
"$BIN" help --completion bash > "$T/oomlab.bash" && bash -n "$T/oomlab.bash"
ok $? "the bash completion is valid bash"
ok $(grep -q 'replay) opts=.*--stop-at-oom' "$T/oomlab.bash" && echo 0 || echo 1) "and completes each command's own options"
if command -v zsh > /dev/null; then
    "$BIN" help --completion zsh | zsh -n; ok $? "the zsh completion is valid zsh"
fi
# an installed oomlab finds its CUDA plugin in PREFIX/lib/oomlab (here a file that is not one)
mkdir -p "$T/prefix/bin" "$T/prefix/lib/oomlab" && cp "$BIN" "$T/prefix/bin/" && echo junk > "$T/prefix/lib/oomlab/oomlab-cuda.so"
out=$("$T/prefix/bin/oomlab" devices 2>&1)
ok $(contains "$out" "prefix/bin/../lib/oomlab/oomlab-cuda.so") "an installed binary looks for the plugin in PREFIX/lib/oomlab"
"$BIN" help --completion fish > /dev/null 2>&1; ok $([ $? = 2 ] && echo 0 || echo 1) "an unknown shell exits 2"

"$BIN" frobnicate > /dev/null 2>&1; ok $([ $? = 2 ] && echo 0 || echo 1) "unknown command exits 2"
"$BIN" --help > /dev/null; ok $? "--help exits 0"
"$BIN" replay > /dev/null 2>&1; ok $([ $? = 2 ] && echo 0 || echo 1) "replay without a file exits 2"
done_testing
