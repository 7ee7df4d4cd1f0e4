/* workload_parallel_test.c: one rank of DDP, ZeRO-1/2/3 and FSDP (job.parallel) against numbers
 * worked here: DeepSpeed's model-state estimators as written in stage_1_and_2.py and stage3.py, the
 * ZeRO partition rule, and what the generator keeps live per category for GPT-2 (124,439,808
 * parameters) in bf16 on 3 and 4 ranks; plus the job checks. Uses the live-bytes sink (no allocator). */
#include <string.h>

#include "tap.h"
#include "workload/generate.h"
#include "workload/live_sink.h"
#include "workload/parallel.h"
#include "workload_parallel_job.h"
#include "workload_run.h"

static void test_estimators(void)
{
    const int64_t p = 1557611200LL; /* gpt2-xl */
    is_int(ds_zero2_gpu_bytes(p, 4, false), 12460889600LL, "ZeRO-2 estimator, gpt2-xl on 4 GPUs: 4P + 16P/4");
    is_int(ds_zero2_gpu_bytes(p, 4, true), 3115222400LL, "ZeRO-2 estimator with cpu_offload: 2P on the GPU");
    is_int(ds_zero2_cpu_bytes(p, 4, 1, false, 1.5), 37382668800LL, "ZeRO-2 CPU without offload: P * 4 * 4 * 1.5");
    is_int(ds_zero2_cpu_bytes(p, 8, 1, true, 1.5), 74765337600LL, "ZeRO-2 CPU offload on 8: P * max(32, 16) * 1.5");
    is_int(ds_zero2_cpu_bytes(p, 2, 1, true, 1.5), 37382668800LL, "ZeRO-2 CPU offload on 2: P * max(8, 16) * 1.5");
    const int64_t p8 = 8030261248LL, largest = 128256LL * 4096; /* llama-3-8b, embed_tokens */
    is_int(ds_zero3_gpu_bytes(p8, largest, 4, false, false), 38237521920LL,
           "ZeRO-3 estimator, llama-3-8b on 4 GPUs: 4 * largest layer + 18P/4");
    is_int(ds_zero3_gpu_bytes(p8, largest, 8, true, false), 4108911616LL, "ZeRO-3, optimizer offload: + 2P/8");
    is_int(ds_zero3_gpu_bytes(p8, largest, 8, true, true), 2101346304LL, "ZeRO-3, all offloaded: 4 * largest layer");
}

static void test_partition(void)
{
    int64_t numel[3] = {10, 7, 5};
    struct zero_sizes z = zero_partition(numel, 3, 4);
    ok(z.total == 22 && z.padded == 24 && z.part == 6, "22 elements on 4 ranks: padded to 24 (2 * 4), 6 each");
    is_int(z.in_part, 10, "rank 0's grads_in_partition holds the whole first tensor touching its 6");
    z = zero_partition(numel, 3, 1);
    ok(z.part == 22 && z.in_part == 22, "one rank: the partition is everything");
}

static void test_zero2_gpt2(void)
{
    struct job_spec s;
    struct live_sink k;
    gpt2_job(&s, PAR_ZERO2, 4);
    const int64_t part = GPT2_P / 4; /* 124,439,808 is a multiple of 8 */
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "ZeRO-2 gpt2 bf16 on 4 ranks runs, consistent");
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * GPT2_P, "bf16 parameters stay whole: 2P");
    is_int(cat_at(&k, "forward", 0, CAT_OPTIMIZER_STATE), 12 * part,
           "fp32 master, exp_avg, exp_avg_sq of the partition from construction: 12P/4");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 2 * GPT2_WTE,
           "after backward: grads_in_partition (wte, 38,597,376 elements, covers rank 0's 31,109,952)");
    const struct live_mark *m = live_sink_mark(&k, "optimizer", 0);
    ok(m && m->peak_after - m->live == 6 * part, "step: the 16-bit flat gradient and its fp32 cast, 6P/4, at once");
    int64_t sim = 2 * GPT2_P + 2 * GPT2_WTE + 18 * part, est = ds_zero2_gpu_bytes(GPT2_P, 4, false);
    diag("ZeRO-2 model states per rank: modelled peak %lld B (2P + grads_in_partition + 18P/N), DeepSpeed's "
         "estimator %lld B (4P + 16P/N)", (long long)sim, (long long)est);
    const struct live_mark *b = live_sink_mark(&k, "backward", 0);
    ok(b && b->peak_after - b->live >= 1000000000LL, "backward allocates the 5e8-element bf16 bucket (1 GB)");
    live_sink_fini(&k);

    s.parallel.reduce_bucket_size = 1000;
    s.parallel.overlap_comm = true;
    ok(run(&s, &k) == 0, "a bucket smaller than a parameter (extra_large_param_to_reduce) runs");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 2 * GPT2_WTE, "the same gradient partition");
    live_sink_fini(&k);

    gpt2_job(&s, PAR_ZERO1, 4);
    s.parallel.contiguous_gradients = false;
    ok(run(&s, &k) == 0, "ZeRO-1 runs");
    is_int(cat_at(&k, "forward", 1, CAT_GRAD), 0, "ZeRO-1: nothing of the gradients survives the step");
    is_int(cat_at(&k, "forward", 1, CAT_OPTIMIZER_STATE), 12 * part, "ZeRO-1: 12P/4 of optimizer state");
    live_sink_fini(&k);
}

static void test_ddp_gpt2(void)
{
    struct job_spec s;
    struct live_sink k;
    gpt2_job(&s, PAR_DDP, 4);
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "DDP runs, consistent");
    is_int(cat_at(&k, "forward", 0, CAT_GRAD), 2 * GPT2_P, "the Reducer's one bucket of every gradient: 2P");
    is_int(cat_at(&k, "backward", 1, CAT_GRAD), 2 * GPT2_P, "rebuilt buckets after step 1: still 2P");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 4 * GPT2_P, "without bucket views .grad is a second 2P");
    is_int(cat_at(&k, "forward", 0, CAT_OPTIMIZER_STATE), 0, "full replicas: optimizer state is made at the step");
    live_sink_fini(&k);
    s.parallel.gradient_as_bucket_view = true;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "DDP with gradient_as_bucket_view runs");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 2 * GPT2_P, "bucket views: gradients once");
    is_int(cat_at(&k, "forward", 1, CAT_GRAD), 2 * GPT2_P, "and kept through zero_grad");
    live_sink_fini(&k);
}

/* GPT-2's root (wte, wpe, ln_f) and one block (ln_1, c_attn, attn.c_proj, ln_2, c_fc, mlp.c_proj). */
#define GPT2_ROOT (GPT2_WTE + 1024LL * 768 + 2 * 768)
#define GPT2_BLOCK (4LL * 768 + 2304LL * 768 + 2304 + 768LL * 768 + 768 + 3072LL * 768 + 3072 + 768LL * 3072 + 768)

static void test_fsdp_gpt2(void)
{
    struct job_spec s;
    struct live_sink k;
    is_int(GPT2_ROOT + 12 * GPT2_BLOCK, GPT2_P, "GPT-2 = root + 12 blocks of 7,087,872");
    gpt2_job(&s, PAR_FSDP, 4);
    const int64_t sh = (GPT2_P + 3 * 768) / 4; /* wte's 50257 rows padded to 50260 */
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "FSDP gpt2 bf16 on 4 ranks runs, consistent");
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * sh, "after load: the dim-0 shards, 31,110,528 elements");
    is_int(cat_at(&k, "backward", 0, CAT_PARAM), 2 * sh + 2 * (GPT2_ROOT + GPT2_BLOCK),
           "forward's end: shards + the root + the last block gathered");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 2 * sh, "after backward: reduce-scattered gradients");
    is_int(cat_at(&k, "forward", 1, CAT_OPTIMIZER_STATE), 4 * sh, "bf16 exp_avg and exp_avg_sq of the shards");
    is_int(cat_at(&k, "forward", 1, CAT_PARAM) + cat_at(&k, "forward", 1, CAT_GRAD), 2 * sh,
           "between steps: shards only, gradients freed");
    live_sink_fini(&k);
    s.parallel.reshard_after_forward = false;
    ok(run(&s, &k) == 0, "FSDP without reshard_after_forward runs");
    is_int(cat_at(&k, "backward", 0, CAT_PARAM), 2 * sh + 2 * GPT2_P,
           "without resharding after forward every unit stays gathered until its backward");
    live_sink_fini(&k);
    gpt2_job(&s, PAR_FSDP, 3); /* 50257 rows: 16753 per rank, padded */
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "FSDP on 3 ranks (rows not divisible) runs");
    int64_t shards = (16753LL + 342) * 768 + 2 * 256 + /* wte, wpe (1024 rows: 342), ln_f weight and bias */
                     12 * (4 * 256 + 768LL * 768 + 768 + 256LL * 768 + 256 + 1024LL * 768 + 1024 + 256LL * 3072 + 256);
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * shards, "dim-0 shards, ceil(rows / 3) rows each");
    live_sink_fini(&k);
}

static void test_zero3_gpt2(void)
{
    struct job_spec s;
    struct live_sink k;
    gpt2_job(&s, PAR_ZERO3, 4);
    const int64_t persistent = 12 * (4 * 768 + 2304 + 768 + 3072 + 768) + 2 * 768; /* biases and norms <= 1e5 */
    const int64_t part = GPT2_P / 4;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "ZeRO-3 gpt2 bf16 on 4 ranks runs, consistent");
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * ((GPT2_P - persistent) / 4 + persistent),
           "ds_tensor partitions, the 121,344 persistent elements whole");
    is_int(cat_at(&k, "forward", 0, CAT_OPTIMIZER_STATE), 12 * part, "fp32 master, exp_avg, exp_avg_sq: 12P/4");
    is_int(cat_at(&k, "forward", 0, CAT_GRAD), 2 * part + 2 * 500000000LL,
           "the gradient partitions (2P/4) and the 5e8-element bucket, kept from construction");
    is_int(cat_at(&k, "forward", 1, CAT_PARAM), cat_at(&k, "forward", 0, CAT_PARAM),
           "between steps nothing stays gathered");
    const struct live_mark *m = live_sink_mark(&k, "forward", 0);
    ok(m && m->peak_after - m->live >= 2 * GPT2_WTE, "a forward gathers wte whole (its 4 x 9,649,344 elements)");
    int64_t largest = GPT2_WTE, est = ds_zero3_gpu_bytes(GPT2_P, largest, 4, false, false);
    int64_t sim = 2 * ((GPT2_P - persistent) / 4 + persistent) + 2 * part + 12 * part + 6 * part + 2 * largest;
    diag("ZeRO-3 model states per rank: modelled %lld B (partitions 2P/N + gradient partitions 2P/N + 12P/N + the "
         "step's 6P/N + wte gathered) + the 1 GB bucket; DeepSpeed's estimator %lld B (4 * largest layer + 18P/N)",
         (long long)sim, (long long)est);
    live_sink_fini(&k);
}

/* cpu_offload: what stays on the device is what DeepSpeed's estimators count there. */
static void test_offload(void)
{
    struct job_spec s;
    struct live_sink k;
    gpt2_job(&s, PAR_ZERO2, 4);
    s.parallel.offload_optimizer = true;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "ZeRO-2 with offload_optimizer runs");
    const struct live_mark *m = live_sink_mark(&k, "optimizer", 0);
    ok(m && m->cat[CAT_OPTIMIZER_STATE] == 0 && m->cat[CAT_GRAD] == 0, "no optimizer state or gradient partition on the device");
    is_int(m ? m->cat[CAT_PARAM] : -1, ds_zero2_gpu_bytes(GPT2_P, 4, true),
           "model states on the device = the estimator's 2P with cpu_offload (248,879,616 B)");
    live_sink_fini(&k);
    gpt2_job(&s, PAR_ZERO3, 4);
    s.parallel.offload_optimizer = s.parallel.offload_param = true;
    const int64_t persistent = 12 * (4 * 768 + 2304 + 768 + 3072 + 768) + 2 * 768;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "ZeRO-3 with both offloads runs");
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * persistent, "only the persistent parameters stay on the device");
    is_int(cat_at(&k, "forward", 0, CAT_GRAD), 2 * 500000000LL, "and the gradient bucket");
    diag("ZeRO-3, both offloaded: DeepSpeed's estimator %lld B (4 x largest layer: wte gathered and its gradient, "
         "2 + 2 bytes each)", (long long)ds_zero3_gpu_bytes(GPT2_P, GPT2_WTE, 4, true, true));
    live_sink_fini(&k);
    gpt2_job(&s, PAR_ZERO2, 4);
    s.parallel.offload_param = true;
    struct err e = {0};
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "offload_param: only with zero3"), "offload_param needs zero3");
}

/* Checkpointed blocks gather their unit again for the recompute, inside its backward. */
static void test_checkpointing(void)
{
    struct job_spec s;
    struct live_sink k;
    gpt2_job(&s, PAR_FSDP, 4);
    s.fixes |= 1u << FIX_GRADIENT_CHECKPOINTING;
    s.autocast = true;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "FSDP with checkpointing under autocast: consistent");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 2 * ((GPT2_P + 3 * 768) / 4), "every gradient reduce-scattered");
    live_sink_fini(&k);
    gpt2_job(&s, PAR_ZERO3, 2);
    s.fixes |= 1u << FIX_GRADIENT_CHECKPOINTING;
    s.steps = 3;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "ZeRO-3 with checkpointing and prefetch (steps 2, 3): consistent");
    is_int(cat_at(&k, "forward", 2, CAT_PARAM), cat_at(&k, "forward", 0, CAT_PARAM),
           "nothing left gathered between steps");
    live_sink_fini(&k);
}

static void test_checks(void)
{
    struct job_spec s;
    struct err e = {0};
    gpt2_job(&s, PAR_ZERO2, 0);
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "parallel.world_size"), "world_size 0: %s", e.msg);
    gpt2_job(&s, PAR_ZERO2, 4);
    memset(&e, 0, sizeof e);
    s.optimizer = OPT_SGD;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "adamw"), "ZeRO with SGD refused: %s", e.msg);
    gpt2_job(&s, PAR_NONE, 4);
    s.optimizer = OPT_SGD;
    ok(job_spec_validate(&s, &e) == 0, "strategy none ignores the rest");
}

int main(void)
{
    test_estimators();
    test_partition();
    test_zero2_gpt2();
    test_ddp_gpt2();
    test_fsdp_gpt2();
    test_zero3_gpt2();
    test_checkpointing();
    test_offload();
    test_checks();
    workload_destroy(last);
    done_testing();
}
