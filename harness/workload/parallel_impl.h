/* parallel_impl.h: the state one rank keeps (parallel.c: DDP buckets and ZeRO partitions;
 * parallel_shard.c: sharded parameters of FSDP and ZeRO-3), shared by those two files only. */
#ifndef OOMLAB_WORKLOAD_PARALLEL_IMPL_H
#define OOMLAB_WORKLOAD_PARALLEL_IMPL_H

#include "workload/gen.h"
#include "workload/parallel.h"

struct shard_param {
    tref shard;              /* this rank's shard of the parameter */
    tref grad;               /* FSDP: its reduce-scattered gradient */
    int32_t unit;            /* what is gathered together; -1: never sharded (ZeRO-3 persistence) */
};

struct parallel {
    /* ZeRO */
    int64_t part;            /* elements of this rank's partition */
    int64_t in_part;         /* ZeRO-1/2: summed numel of the parameters touching it (grads_in_partition) */
    tref master, m, v;
    tref ipg[2];
    int64_t ipg_fill;
    tref grads_part;
    /* DDP */
    tref *buckets;
    int nbuckets;
    bool rebuilt;
    /* FSDP, ZeRO-3 */
    struct shard_param *sp;  /* per parameter */
    bool *gathered;          /* per unit */
    int32_t nunits;
    int32_t cur;             /* the unit running, -1 none */
    bool in_backward;
    /* tensor parallel: Megatron's global memory buffer of sequence-parallel all-gathers */
    tref tp_buffer;
};

struct parallel *parallel_get(struct gen *g); /* created at first use */
void shard_free(struct parallel *p);
void shard_backward_begin(struct gen *g);
void shard_backward_end(struct gen *g);
void shard_optimizer_step(struct gen *g);
void shard_zero_grad(struct gen *g);

#endif
