#!/bin/sh
# gen_sizes.sh: a tensor whose size does not fit the largest size oomlab models (4 EiB) stops the
# generator with an input error naming the tensor, its shape and dtype, instead of wrapping around
# (issue 10 row 7: a cnn with in_channels 65536, batch 1048576, image 65536 made the OOM name a wrapped
# 256 GiB); one that fits reaches the allocator, which refuses it as PyTorch does (over 1 EB).
BIN=${OOMLAB_BIN:-build/oomlab}
. "$(dirname "$0")/tap.shlib"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
scenario() { # batch image
    cat <<EOF2
name: huge-cnn
title: tensors past 4 EiB
source: tests/gen_sizes.sh
model: { family: cnn, in_channels: 65536, channels: [32], out_channels: 10, groups: 1, layers_per_block: 1 }
job: { batch_size: $1, image_size: $2, steps: 1 }
variants:
  before:
    expect: { oom: true }
EOF2
}
scenario 1048576 65536 > "$T/wraps.yaml"
out=$("$BIN" run "$T/wraps.yaml" 2>&1); rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "a 2^70-byte input tensor is an input error (exit $rc)"
ok $(contains "$out" "workload: tensor images [1048576, 65536, 65536, 65536] of fp32 is larger than 4 EiB (2^62 bytes)") "naming the tensor, its shape and dtype ($out)"
ok $([ "$(contains "$out" "Tried to allocate")" = 1 ] && echo 0 || echo 1) "and no OOM of a wrapped size"

scenario 65536 8192 > "$T/fits.yaml"
out=$("$BIN" run "$T/fits.yaml" 2>&1); rc=$?
ok $rc "a 2^60-byte input tensor is modelled (exit $rc)"
ok $(contains "$out" "CUDA out of memory. Tried to allocate more than 1EB memory.") "and the allocator refuses it as PyTorch would"
done_testing
