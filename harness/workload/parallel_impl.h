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
    bool reduced;            /* FSDP2: its gradient went into the running reduce-scatter */
};

/* FSDP1 (parallel_fsdp1.c): one FlatParameter per unit. */
struct fsdp1_unit {
    int64_t flat;            /* elements of the flat parameter: its parameters, with use_orig_params' alignment
                              * and world-size padding */
    int64_t shard;           /* this rank's shard, ceil(flat / world_size) */
    tref local;              /* the shard (_local_shard); TNONE with cpu_offload */
    tref full;               /* the padded unsharded flat parameter (_full_param_padded) while gathered */
    tref grad;               /* the reduce-scattered flat gradient (_saved_grad_shard) */
    int32_t first, last;     /* its first and last parameter */
    const char *tag;
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
    struct fsdp1_unit *fu;   /* FSDP1: per unit */
    int64_t *fu_off;         /* FSDP1: per parameter, where it starts in its unit's flat parameter */
    struct tref_list held;   /* FSDP: collective inputs alive until the collective's output exists */
};

struct parallel *parallel_get(struct gen *g); /* created at first use */
void shard_free(struct parallel *p);
void shard_backward_begin(struct gen *g);
void shard_backward_end(struct gen *g);
void shard_optimizer_step(struct gen *g);
void shard_zero_grad(struct gen *g);
int64_t shard_numel(const struct gen *g, const struct param *p); /* FSDP2's dim-0 shard, ZeRO-3's partition */
size_t block_prefix(const char *tag);  /* length of "model.layers.12." in a tag, 0 outside blocks */

/* parallel_fsdp.c */
void fsdp2_gather_inputs(struct gen *g, int32_t u);

/* parallel_fsdp1.c: the layout once units are assigned; a loaded parameter; gather and reshard of a unit;
 * its post-backward (the flat gradient made before the reshard, reduced after it); the optimizer's view of
 * a parameter; the end of backward; zero_grad. */
int fsdp1_init(struct gen *g, struct parallel *par);
void fsdp1_loaded(struct gen *g, int32_t i);
void fsdp1_gather(struct gen *g, int32_t u);
void fsdp1_reshard(struct gen *g, int32_t u);
tref fsdp1_flat_grad(struct gen *g, int32_t u);
void fsdp1_reduce(struct gen *g, int32_t u, tref flat);
void fsdp1_optimizer_view(struct gen *g, int32_t i);
void fsdp1_backward_end(struct gen *g);
void fsdp1_zero_grad(struct gen *g);

#endif
