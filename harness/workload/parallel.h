/* parallel.h: the sizes one rank of ZeRO keeps, and DeepSpeed's own estimators of them, for reports
 * and tests (the generator's hooks are in gen.h). */
#ifndef OOMLAB_WORKLOAD_PARALLEL_H
#define OOMLAB_WORKLOAD_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

#include "workload/spec.h"

/* ZeRO-1/2/3: the optimizer owns fp32 master weights of its partition; FSDP and ZeRO-3 shard the parameters. */
bool parallel_zero(const struct job_spec *s);
bool parallel_shards_params(const struct job_spec *s);

/* FSDP1 or FSDP2 (parallel_fsdp.c); the dtype its units are gathered (and computed) in, and the dtype of
 * its gradient reduce-scatter (mixed_precision); the checks of its keys. */
bool parallel_fsdp(const struct job_spec *s);
enum dtype fsdp_gather_dtype(const struct job_spec *s);
enum dtype fsdp_reduce_dtype(const struct job_spec *s);
int fsdp_spec_check(const struct job_spec *s, struct err *e);

/* NCCL's own device buffers for one rank's ring (parallel_nccl.c): bytes of a receive and of a send
 * connection, and of all of them (nccl_channels of each); all 0 without peers or over host memory. */
struct nccl_conn {
    int64_t recv, send, total;
};
struct nccl_conn nccl_connections(const struct parallel_spec *p);

/* DeepSpeedZeroOptimizer's partition of trainable tensors of these sizes, in order, over world ranks:
 * the flat size padded to 2 * world, this rank's share, and rank 0's grads_in_partition (the summed
 * numel of every tensor touching its share). */
struct zero_sizes {
    int64_t total, padded, part, in_part;
};
struct zero_sizes zero_partition(const int64_t *numel, int32_t n, int world);

/* DeepSpeed's estimators, as written (stage_1_and_2.py estimate_zero2_model_states_mem_needs, stage3.py
 * estimate_zero3_model_states_mem_needs with zero_init): GPU and CPU bytes of model states. */
int64_t ds_zero2_gpu_bytes(int64_t total_params, int gpus, bool cpu_offload);
int64_t ds_zero2_cpu_bytes(int64_t total_params, int gpus_per_node, int nodes, bool cpu_offload, double factor);
int64_t ds_zero3_gpu_bytes(int64_t total_params, int64_t largest_layer_params, int gpus, bool offload_optimizer,
                           bool offload_params);

#endif
