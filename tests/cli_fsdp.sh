#!/bin/sh
# cli_fsdp.sh: the job.parallel keys of FSDP1, FSDP mixed precision, CPU offload and NCCL's buffers from a
# scenario file: bad values and keys used with the wrong strategy exit 2 naming the key, with no result
# file; the run's table and JSON give NCCL's buffers apart from the allocator's figures, as modelled.
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"

# the scenario with its parallel mapping replaced by $1
scenario() {
    sed "s|^  parallel: { strategy: fsdp, world_size: 2 }|  parallel: $1|" scenarios/fsdp_too_few_ranks.yaml > "$T/s.yaml"
}

refused() { # $1 mapping, $2 text the message must hold
    scenario "$1"
    out=$("$BIN" run --json "$T/out.json" "$T/s.yaml" 2>&1); rc=$?
    ok $([ $rc = 2 ] && echo 0 || echo 1) "$1: exit 2 (got $rc)"
    ok $(contains "$out" "$2") "names $2 ($out)"
    ok $([ ! -e "$T/out.json" ] && echo 0 || echo 1) "no result file"
}

refused "{ strategy: fsdp1, world_size: 2, mixed_precision: { param_dtype: bf17 } }" \
    "job.parallel.mixed_precision.param_dtype must be none, fp32, bf16 or fp16"
refused "{ strategy: fsdp, world_size: 2, mixed_precision: { keep_low_precision_grads: true } }" \
    "keep_low_precision_grads"
refused "{ strategy: ddp, world_size: 2, cpu_offload: true }" "parallel.cpu_offload: only with fsdp or fsdp1"
refused "{ strategy: fsdp, world_size: 2, backward_prefetch: backward_post }" "parallel.backward_prefetch: only with fsdp1"
refused "{ strategy: fsdp1, world_size: 2, backward_prefetch: pre }" "job.parallel.backward_prefetch must be"
refused "{ strategy: fsdp1, world_size: 2, nccl_transport: ib }" "job.parallel.nccl_transport must be p2p or shm"
refused "{ strategy: fsdp1, world_size: 2, nccl_buffsize: 1KiB }" "parallel.nccl_buffsize: 4KiB..4GiB"

scenario "{ strategy: fsdp1, world_size: 8, forward_prefetch: 0, nccl_channels: 4 }"
sed -i 's|expect: { oom: true, oom_phase: optimizer }|expect: { oom: false }|' "$T/s.yaml" # 8 ranks fit
out=$("$BIN" run --json "$T/r.json" "$T/s.yaml" 2>&1)
ok $? "fsdp1 on 8 ranks runs (exit 0)"
ok $(contains "$out" "nccl: 48.00 MiB of NCCL's own device buffers over 4 channels (modelled)") \
    "the table gives NCCL's 4 x 12 MiB apart"
ok $(grep -q '"nccl_buffers": {' "$T/r.json" && grep -q '"bytes": 50331648' "$T/r.json" && echo 0 || echo 1) \
    "the JSON too (50,331,648 B)"
scenario "{ strategy: fsdp1, world_size: 8, forward_prefetch: 0, nccl_transport: shm }"
out=$("$BIN" run "$T/s.yaml" 2>&1)
ok $([ -n "$out" ] && ! echo "$out" | grep -q "nccl:" && echo 0 || echo 1) "shm: no NCCL buffers on the device"

done_testing
