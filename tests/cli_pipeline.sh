#!/bin/sh
# cli_pipeline.sh: pipeline-parallel jobs (job.parallel.pipeline_parallel) through oomlab run and fit:
# Llama-3-8B on 4 x RTX 5090 (scenarios/pipeline_gpipe_activations.yaml), every stage in the table and the
# JSON with its layers, micro-batches in flight (GPipe 8 each; 1F1B 4, 3, 2, 1) and parameter bytes worked
# here, the stage shown; the fewest stages `oomlab fit` finds; tensor x pipeline parallel
# (scenarios/pipeline_tensor_3d.yaml: per-stage parameters, p2p buffer sizes, fit); and combinations not
# built refused with the key named (exit 2, no results file).
BIN=${OOMLAB_BIN:-build/oomlab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/tap.shlib"
S=scenarios/pipeline_gpipe_activations.yaml

"$BIN" run --json "$T/run.json" "$S" > "$T/run.txt" 2>&1; rc=$?
ok $([ $rc = 0 ] && echo 0 || echo 1) "the scenario meets its expectations (exit $rc)"
J=$(tr -d ' \n' < "$T/run.json")
# each variant's pipeline object, up to the end of its stages array: before, after-1f1b, after-1f1b-2-stages
printf '%s' "$J" | grep -o '"pipeline":{[^]]*]' > "$T/pipes"
ok $([ $(wc -l < "$T/pipes") = 3 ] && echo 0 || echo 1) "every variant has its stages in the JSON"
F=$(sed -n 2p "$T/pipes")
flights=$(printf '%s' "$F" | grep -o '"in_flight":[0-9]*' | head -4 | cut -d: -f2 | tr '\n' ' ')
ok $([ "$flights" = "4 3 2 1 " ] && echo 0 || echo 1) "1F1B, 4 stages, 8 micro-batches: in flight 4 3 2 1 ($flights)"
G=$(sed -n 1p "$T/pipes")
gflights=$(printf '%s' "$G" | grep -o '"in_flight":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
ok $([ "$gflights" = "8 8 8 8 " ] && echo 0 || echo 1) "GPipe: 8 in flight on every stage ($gflights)"
# Llama-3-8B: 218,112,000 parameters a layer, embed_tokens and lm_head 128256 x 4096 each, bf16
params=$(printf '%s' "$F" | grep -o '"params":[0-9]*' | head -4 | cut -d: -f2 | tr '\n' ' ')
ok $([ "$params" = "4540465152 3489792000 3489792000 4540473344 " ] && echo 0 || echo 1) \
    "parameter bytes per stage: 2 x (8 layers, + embed_tokens first, + norm and lm_head last) ($params)"
# the pipeline's throughput: 8 samples per step of the slowest stage's kernels x (8 + 4 - 1) / 8
steps=$(printf '%s' "$F" | grep -o '"step_kernel_seconds":[0-9.e+-]*' | cut -d: -f2 | tr '\n' ' ')
got=$(printf '%s' "$J" | grep -o '"samples_per_s":[0-9.e+-]*' | sed -n 2p | cut -d: -f2)
ok $(echo "$steps $got" | awk '{m = 0; for (i = 1; i <= 4; i++) if ($i > m) m = $i; w = 8 / (m * 11 / 8);
    exit !(m > 0 && $5 > 0.999 * w && $5 < 1.001 * w)}' && echo 0 || echo 1) \
    "1F1B samples/s = 8 / (slowest stage's step x 11 / 8) (stages: $steps; samples/s $got)"
ok $(contains "$(cat "$T/run.txt")" "stage 0 (embedding, layers 0-7): 4 in flight") "the table lists stage 0 of 1F1B"
ok $(contains "$(cat "$T/run.txt")" "stage 3 (layers 24-31, norm, head, loss): 1 in flight") "and its last stage"
ok $(contains "$(cat "$T/run.txt")" "the figures above are stage 0's (the first to OOM)") "it says which stage is shown"

"$BIN" fit --param pipeline_parallel --json "$T/fit.json" "$S" > "$T/fit.txt" 2>&1; rc=$?
FJ=$(tr -d ' \n' < "$T/fit.json")
smallest=$(printf '%s' "$FJ" | grep -o '"smallest":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
ok $([ $rc = 0 ] && [ "$smallest" = "16 4 4 " ] && echo 0 || echo 1) \
    "fit --param pipeline_parallel: GPipe needs 16 stages, 1F1B 4 (exit $rc: $smallest)"

# oomlab program: one stage's op program
"$BIN" program --variant after-1f1b --stage 1 "$S" > "$T/p1.txt" 2>&1; rc1=$?
"$BIN" program --variant after-1f1b "$S" > "$T/p0.txt" 2>&1; rc0=$?
ok $([ $rc1 = 0 ] && [ $rc0 = 0 ] && grep -q '^# pipeline stage 1 of 4' "$T/p1.txt" &&
    grep -q '^# pipeline stage 0 of 4' "$T/p0.txt" && echo 0 || echo 1) \
    "program --stage 1 prints stage 1's program, stage 0 by default"
ok $(grep -q 'pipeline.recv_forward' "$T/p1.txt" && ! grep -q 'pipeline.recv_forward' "$T/p0.txt" &&
    ! grep -q 'embed_tokens' "$T/p1.txt" && grep -q 'embed_tokens' "$T/p0.txt" && echo 0 || echo 1) \
    "stage 1 receives its input and has no embedding; stage 0 embeds and receives nothing"
# p2p buffers: micro_batch x seq x hidden in bf16 = 1 x 2048 x 4096 x 2 B, one per micro-batch and step
fwd=$(grep -c '^alloc t[0-9]* 16777216 s0 activation pipeline.recv_forward$' "$T/p1.txt")
bwd=$(grep -c '^alloc t[0-9]* 16777216 s0 temp pipeline.recv_backward$' "$T/p1.txt")
"$BIN" program --variant after-1f1b --stage 3 "$S" > "$T/p3.txt" 2>&1
last=$(grep -c 'pipeline.recv_backward' "$T/p3.txt")
ok $([ "$fwd" = 16 ] && [ "$bwd" = 16 ] && [ "$last" = 0 ] && echo 0 || echo 1) \
    "stage 1 receives 16 inputs and 16 output gradients of 16,777,216 B (2 steps of 8); the last stage no
    gradient ($fwd, $bwd, $last)"
"$BIN" program --variant after-1f1b --stage 4 "$S" > "$T/p4.txt" 2>&1; rc=$?
ok $([ $rc = 2 ] && echo 0 || echo 1) "--stage 4 of 4 stages: exit 2 ($(cat "$T/p4.txt"))"

# 3D parallelism (scenarios/pipeline_tensor_3d.yaml): Llama-3-8B on 8 x RTX 5090 as 8 stages, or tensor
# parallel 2 x 4 stages, with and without sequence parallelism
S3=scenarios/pipeline_tensor_3d.yaml
"$BIN" run --json "$T/3d.json" "$S3" > "$T/3d.txt" 2>&1; rc=$?
ok $([ $rc = 0 ] && echo 0 || echo 1) "TP x PP: the scenario meets its expectations (exit $rc)"
tr -d ' \n' < "$T/3d.json" | grep -o '"pipeline":{[^]]*]' > "$T/3dpipes"
P3=$(sed -n 2p "$T/3dpipes")
flights=$(printf '%s' "$P3" | grep -o '"in_flight":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
ok $([ "$flights" = "4 3 2 1 " ] && echo 0 || echo 1) "TP 2 x PP 4: in flight 4 3 2 1, as without TP ($flights)"
# per stage at TP 2: 8 layers of 109,060,096 (q, k, v, o, gate, up, down halved, 2 norms whole), embed_tokens
# and lm_head 64128 x 4096; bf16. The embedding's 525,336,576 B take a block of 251 x 2 MiB: the segment's
# 1 MiB rest is not split off (PyTorch's should_split: remaining > kSmallSize)
params=$(printf '%s' "$P3" | grep -o '"params":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
ok $([ "$params" = "2271346688 1744961536 1744961536 2271354880 " ] && echo 0 || echo 1) \
    "TP 2 x PP 4 parameter bytes per stage: 2 x 8 x 109,060,096 (+ embed_tokens / 2 first, norm and lm_head / 2 last) ($params)"
# p2p: [1, 4096, 4096] bf16, [1, 2048, 4096] with sequence parallelism (schedules.py get_tensor_shapes)
for v in after-tp2-pp4:33554432 after-tp2-pp4-sp:16777216; do
    "$BIN" program --variant ${v%:*} --stage 1 "$S3" > "$T/3dp.txt" 2>&1
    fwd=$(grep -c "^alloc t[0-9]* ${v#*:} s0 activation pipeline.recv_forward$" "$T/3dp.txt")
    bwd=$(grep -c "^alloc t[0-9]* ${v#*:} s0 temp pipeline.recv_backward$" "$T/3dp.txt")
    ok $([ "$fwd" = 16 ] && [ "$bwd" = 16 ] && echo 0 || echo 1) \
        "${v%:*}, stage 1: 16 inputs and 16 output gradients of ${v#*:} B ($fwd, $bwd)"
done
"$BIN" fit --param pipeline_parallel --json "$T/3dfit.json" "$S3" > "$T/3dfit.txt" 2>&1; rc=$?
smallest=$(tr -d ' \n' < "$T/3dfit.json" | grep -o '"smallest":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
ok $([ $rc = 0 ] && [ "$smallest" = "16 4 2 " ] && echo 0 || echo 1) \
    "fit --param pipeline_parallel with tensor_parallel set: 16 stages alone, 4 at TP 2, 2 at TP 2 + SP (exit $rc: $smallest)"
# with DDP, world_size counts every rank (tensor x pipeline x data parallel, as Megatron's): 16 = 2 x 4 x 2,
# and the fewest ranks `oomlab fit` finds are one replica's 2 x 4
{ sed '/^variants:/,$d; s/^  parallel: .*/  parallel: { tensor_parallel: 2, pipeline_parallel: 4, micro_batches: 8, strategy: ddp, world_size: 16 }/' "$S3"
  printf 'variants:\n  before:\n    expect: { oom: false }\n'; } > "$T/3dddp.yaml"
"$BIN" fit --param world_size --json "$T/3dws.json" "$T/3dddp.yaml" > "$T/3dws.txt" 2>&1; rc=$?
smallest=$(tr -d ' \n' < "$T/3dws.json" | grep -o '"smallest":[0-9]*' | cut -d: -f2)
ok $([ $rc = 0 ] && [ "$smallest" = 8 ] && echo 0 || echo 1) \
    "TP 2 x PP 4 x DDP: fit --param world_size searches multiples of 8 and finds 8 (exit $rc: $smallest)"
sed 's/world_size: 16/world_size: 12/' "$T/3dddp.yaml" > "$T/bad.yaml"
"$BIN" run "$T/bad.yaml" > "$T/bad.txt" 2>&1; rc=$?
ok $([ $rc = 2 ] && grep -q "not a multiple of tensor_parallel x pipeline_parallel 8" "$T/bad.txt" && echo 0 || echo 1) \
    "world_size 12 with TP 2 x PP 4 x DDP refused, exit 2 ($rc: $(cat "$T/bad.txt"))"

bad() { # $1: the job's parallel line, $2: what the message must say
    sed "s/^  parallel: .*/  parallel: $1/" "$S" > "$T/bad.yaml"
    "$BIN" run --json "$T/bad.json" "$T/bad.yaml" > "$T/bad.txt" 2>&1; rc=$?
    ok $([ $rc = 2 ] && [ ! -e "$T/bad.json" ] && echo 0 || echo 1) "refused, exit 2, nothing written: $1 (exit $rc)"
    ok $(contains "$(cat "$T/bad.txt")" "$2") "  the message says: $2"
}
bad "{ pipeline_parallel: 3, micro_batches: 8 }" \
    "parallel.pipeline_parallel: model.layers (32) must split evenly over 3 stages"
bad "{ pipeline_parallel: 4, micro_batches: 8, strategy: fsdp, world_size: 2 }" \
    "parallel.pipeline_parallel: modelled for strategy none or ddp"
bad "{ micro_batches: 8 }" "parallel.micro_batches: only with parallel.pipeline_parallel above 1"
bad "{ pipeline_parallel: 4, schedule: interleaved }" "schedule"
# on the host the stages' kernels are measured, the bubble is not: the throughput says it is modelled from them
cat > "$T/host.yaml" <<'EOF2'
name: host-pipeline
title: a two-stage pipeline of the tiny transformer on the CPU
source: "cli_pipeline.sh"
device: host:2GiB
model: { preset: tiny-transformer, vocab: 2048 }
job: { batch_size: 2, seq_len: 64, optimizer: adamw, steps: 2, parallel: { pipeline_parallel: 2, micro_batches: 4 } }
variants:
  before:
    expect: { oom: false }
EOF2
"$BIN" run "$T/host.yaml" > "$T/host.txt" 2>&1; rc=$?
ok $([ $rc = 0 ] && echo 0 || echo 1) "a pipeline runs on the host device (exit $rc)"
ok $(contains "$(tr -s ' \n' '  ' < "$T/host.txt")" "(modelled from measured stages: the slowest stage's median step") \
    "its throughput is modelled from the measured stages, not called measured"
done_testing
