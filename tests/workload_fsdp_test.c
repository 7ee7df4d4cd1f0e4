/* workload_fsdp_test.c: FSDP1's flat parameters, FSDP mixed precision and CPU offload (job.parallel
 * strategy fsdp1 / fsdp, mixed_precision, cpu_offload, use_orig_params, backward_prefetch) and NCCL's own
 * buffers (nccl_channels, nccl_buffsize, nccl_transport) against numbers
 * worked here for GPT-2 (124,439,808 parameters: a root unit of wte, wpe and ln_f, and 12 blocks of
 * 7,087,872); plus the checks of those keys. Uses the live-bytes sink (no allocator). */
#include <string.h>

#include "tap.h"
#include "workload/generate.h"
#include "workload/live_sink.h"
#include "workload/parallel.h"
#include "workload_parallel_job.h"
#include "workload_run.h"

#define GPT2_ROOT (GPT2_WTE + 1024LL * 768 + 2 * 768) /* 39,385,344 */
#define GPT2_BLOCK 7087872LL

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* One flat parameter per unit, padded to world_size: on 5 ranks the root's 39,385,344 elements give
 * shards of 7,877,069 (1 padding element) and a block's 7,087,872 shards of 1,417,575 (3). */
static void test_fsdp1_flat(void)
{
    struct job_spec s;
    struct live_sink k;
    gpt2_job_dtype(&s, PAR_FSDP1, 5, DT_BF16);
    const int64_t root = ceil_div(GPT2_ROOT, 5), block = ceil_div(GPT2_BLOCK, 5);
    ok(root == 7877069 && block == 1417575, "shards on 5 ranks: 7,877,069 and 1,417,575");
    const int64_t shards = root + 12 * block;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "FSDP1 gpt2 bf16 on 5 ranks runs, consistent");
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * shards, "after wrapping: the 13 flat shards, 24,887,969 elements");
    is_int(cat_at(&k, "backward", 0, CAT_PARAM), 2 * shards + 2 * 5 * (root + block),
           "forward's end: + the root's and the last block's padded flat buffers (shard x 5 each)");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 2 * shards,
           "after backward: one reduce-scattered flat gradient per unit");
    is_int(cat_at(&k, "forward", 1, CAT_OPTIMIZER_STATE), 4 * shards,
           "AdamW on the FlatParameters: exp_avg and exp_avg_sq of each padded shard");
    is_int(cat_at(&k, "forward", 1, CAT_PARAM) + cat_at(&k, "forward", 1, CAT_GRAD), 2 * shards,
           "between steps: shards only");
    live_sink_fini(&k);

    /* FSDP2 on the same 5 ranks pads each parameter's rows instead */
    gpt2_job_dtype(&s, PAR_FSDP, 5, DT_BF16);
    ok(run(&s, &k) == 0, "FSDP2 on 5 ranks runs");
    ok(cat_at(&k, "forward", 0, CAT_PARAM) != 2 * shards, "FSDP2's dim-0 shards differ from FSDP1's flat ones (%lld B)",
       (long long)cat_at(&k, "forward", 0, CAT_PARAM));
    live_sink_fini(&k);

    gpt2_job_dtype(&s, PAR_FSDP1, 5, DT_BF16);
    s.parallel.use_orig_params = true;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "FSDP1 with use_orig_params runs");
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * shards,
           "use_orig_params: every numel a multiple of 8 (16 B of bf16), no alignment padding: the same shards");
    is_int(cat_at(&k, "forward", 1, CAT_OPTIMIZER_STATE), 4 * shards,
           "rank 0's shards hold no padding (it is on the last rank): the same optimizer state, per parameter");
    live_sink_fini(&k);

    gpt2_job_dtype(&s, PAR_FSDP1, 5, DT_BF16);
    s.fixes |= 1u << FIX_GRADIENT_CHECKPOINTING;
    s.grad_accum = 2;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "FSDP1 with checkpointing and 2 micro-batches: consistent");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 2 * shards, "the second backward adds into the kept flat shards");
    is_int(cat_at(&k, "forward", 2, CAT_PARAM), 2 * shards, "nothing left gathered between steps");
    live_sink_fini(&k);
}

/* use_orig_params aligns each parameter to 16 bytes of bf16 (8 elements): a one-block GPT-2 of width 100
 * (ffn 300, vocab 1001, 64 positions). The block's 101,200 elements gain 4 after each of ln_1.weight,
 * ln_1.bias, c_attn.bias, attn.c_proj.bias, ln_2.weight, ln_2.bias and c_fc.bias: 101,228, shards of
 * 25,307 on 4 ranks; the root's 106,700 (wte, wpe, ln_f) gain 4 after wte and after ln_f.weight: 106,708,
 * shards of 26,677. Rank 0's block shard [0, 25307) holds two of those paddings, which get no optimizer
 * state: 26,677 + 25,299 elements. Without use_orig_params: 26,675 + 25,300, state for all of it. On 3
 * ranks: shards of 35,567 and 33,734 (padded flat buffers of 106,701 and 101,202), or with use_orig_params
 * 35,570 and 33,743 (106,710 and 101,229). scripts/torch-fsdp1-layout prints the same from torch's own
 * FSDP1 on the CPU. */
static void test_fsdp1_alignment(void)
{
    struct job_spec s;
    struct live_sink k;
    const int64_t shards3[2] = {35567 + 33734, 35570 + 33743}, full3[2] = {106701 + 101202, 106710 + 101229};
    for (int run3 = 0; run3 < 4; run3++) {
        int orig = run3 % 2, world = run3 < 2 ? 4 : 3;
        gpt2_job_dtype(&s, PAR_FSDP1, world, DT_BF16);
        struct err e = {0};
        preset_apply(&s.model, "gpt2", &e);
        s.model.layers = 1;
        s.model.hidden = 100;
        s.model.heads = 4;
        s.model.ffn = 300;
        s.model.vocab = 1001;
        s.model.max_positions = 64;
        s.seq_len = 16;
        s.parallel.use_orig_params = orig;
        const char *what = orig ? "use_orig_params" : "flat parameters";
        ok(run(&s, &k) == 0 && live_sink_consistent(&k), "%s on %d ranks: the small GPT-2 runs", what, world);
        if (world == 3) {
            is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * shards3[orig], "%s on 3: the shards", what);
            is_int(cat_at(&k, "backward", 0, CAT_PARAM), 2 * (shards3[orig] + full3[orig]),
                   "%s on 3: + the root's and the block's padded flat buffers", what);
            live_sink_fini(&k);
            continue;
        }
        is_int(cat_at(&k, "forward", 0, CAT_PARAM), orig ? 2 * (26677 + 25307) : 2 * (26675 + 25300),
               "%s: the shards", what);
        is_int(cat_at(&k, "forward", 1, CAT_OPTIMIZER_STATE), orig ? 4 * (26677 + 25299) : 4 * (26675 + 25300),
               "%s: AdamW's bf16 moments", what);
        live_sink_fini(&k);
    }
}

/* LoRA under FSDP1 (use_orig_params): the frozen base is sharded, the adapters stay whole and train. */
static void test_fsdp1_lora(void)
{
    struct job_spec s;
    struct live_sink k;
    gpt2_job_dtype(&s, PAR_FSDP1, 4, DT_BF16);
    s.trainable = TRAIN_LORA;
    s.parallel.use_orig_params = true;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "FSDP1 LoRA with use_orig_params runs, consistent");
    int64_t adapters = cat_at(&k, "forward", 1, CAT_OPTIMIZER_STATE);
    ok(adapters > 0 && adapters < 2 * GPT2_P / 100, "AdamW state of the adapters only (%lld B)", (long long)adapters);
    is_int(cat_at(&k, "forward", 1, CAT_GRAD), 0, "zero_grad frees the adapters' gradients");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD) , adapters / 2, "before the step: the adapters' gradients, whole");
    live_sink_fini(&k);
}

/* The most parameter bytes live during backward, seen op by op through the live-bytes sink. */
struct param_peak {
    struct op_sink base;
    struct live_sink k;
    bool in_backward;
    int64_t max;
};

static int param_peak_emit(struct op_sink *sink, const struct op *op, struct err *e)
{
    struct param_peak *pp = (struct param_peak *)sink;
    int rc = pp->k.base.emit(&pp->k.base, op, e);
    if (op->kind == OP_PHASE)
        pp->in_backward = op->name && !strcmp(op->name, "backward");
    if (pp->in_backward && pp->k.cat[CAT_PARAM] > pp->max)
        pp->max = pp->k.cat[CAT_PARAM];
    return rc;
}

static int64_t backward_param_peak(const struct job_spec *s)
{
    struct param_peak pp = {.base.emit = param_peak_emit};
    struct err e = {0};
    live_sink_init(&pp.k, &e);
    workload_destroy(last);
    last = workload_create(s, &e);
    int rc = last ? workload_run(last, &pp.base, &e) : -1;
    live_sink_fini(&pp.k);
    return rc < 0 ? -1 : pp.max;
}

/* The units gathered in backward: the running block and, with backward_pre, the next one (and the root,
 * kept gathered from forward). */
static void test_fsdp1_prefetch(void)
{
    struct job_spec s;
    int64_t peak[BWD_PREFETCH_COUNT];
    const int64_t shards = 2 * GPT2_P / 4;
    for (int b = 0; b < BWD_PREFETCH_COUNT; b++) {
        gpt2_job_dtype(&s, PAR_FSDP1, 4, DT_BF16);
        s.parallel.backward_prefetch = b;
        s.parallel.forward_prefetch = 0;
        peak[b] = backward_param_peak(&s);
    }
    is_int(peak[BWD_PREFETCH_PRE], shards + 2 * (GPT2_ROOT + 2 * GPT2_BLOCK),
           "backward_pre: shards + the root + two blocks gathered at most");
    is_int(peak[BWD_PREFETCH_NONE], shards + 2 * (GPT2_ROOT + GPT2_BLOCK), "none: one block");
    is_int(peak[BWD_PREFETCH_POST], peak[BWD_PREFETCH_NONE],
           "backward_post: the next block is gathered after the previous one is freed");
}

/* Mixed precision: fp32 shards, bf16 gathered, gradients reduced in fp32 and kept as fp32 shards. */
static void test_mixed_precision(void)
{
    struct job_spec s;
    struct live_sink k;
    gpt2_job_dtype(&s, PAR_FSDP1, 4, DT_F32);
    s.parallel.mp.param_dtype = DT_BF16 + 1;
    s.parallel.mp.reduce_dtype = DT_F32 + 1;
    ok(fsdp_gather_dtype(&s) == DT_BF16 && fsdp_reduce_dtype(&s) == DT_F32, "gather bf16, reduce fp32");
    const int64_t q = GPT2_P / 4; /* every unit divides by 4 */
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "FSDP1 MixedPrecision(bf16, fp32) runs, consistent");
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 4 * q, "fp32 flat shards: 4P/4");
    is_int(cat_at(&k, "backward", 0, CAT_PARAM), 4 * q + 2 * (GPT2_ROOT + GPT2_BLOCK),
           "the root and the last block gathered in bf16 (2 bytes each)");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 4 * q, "sharded gradients cast back to fp32: 4P/4");
    is_int(cat_at(&k, "forward", 1, CAT_OPTIMIZER_STATE), 8 * q, "fp32 exp_avg and exp_avg_sq: 8P/4");
    int64_t act = cat_at(&k, "backward", 0, CAT_ACTIVATION);
    live_sink_fini(&k);
    gpt2_job_dtype(&s, PAR_FSDP1, 4, DT_BF16);
    ok(run(&s, &k) == 0, "pure bf16 FSDP1 runs");
    is_int(act, cat_at(&k, "backward", 0, CAT_ACTIVATION),
           "the forward computes in bf16: the same activations as pure bf16");
    live_sink_fini(&k);
    gpt2_job_dtype(&s, PAR_FSDP1, 4, DT_F32);
    s.parallel.mp.param_dtype = DT_BF16 + 1;
    s.parallel.mp.reduce_dtype = 0;
    ok(fsdp_reduce_dtype(&s) == DT_BF16, "FSDP1: reduce_dtype unset follows param_dtype");
    ok(run(&s, &k) == 0, "reduce in bf16 runs");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 4 * q, "the sharded gradient is still cast to the shards' fp32");
    live_sink_fini(&k);

    gpt2_job_dtype(&s, PAR_FSDP, 4, DT_F32);
    s.parallel.mp.param_dtype = DT_BF16 + 1;
    s.parallel.mp.reduce_dtype = DT_F32 + 1;
    const int64_t sh = (GPT2_P + 3 * 768) / 4; /* wte's 50257 rows padded to 50260 */
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "FSDP2 MixedPrecisionPolicy(bf16, fp32) runs, consistent");
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 4 * sh, "fp32 dim-0 shards");
    is_int(cat_at(&k, "backward", 0, CAT_PARAM), 4 * sh + 2 * (GPT2_ROOT + GPT2_BLOCK), "gathered in bf16");
    is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 4 * sh, "fp32 sharded gradients");
    is_int(cat_at(&k, "forward", 1, CAT_OPTIMIZER_STATE), 8 * sh, "fp32 AdamW state");
    live_sink_fini(&k);
}

/* CPU offload: nothing of the model states stays on the device between units. */
static void test_cpu_offload(void)
{
    struct job_spec s;
    struct live_sink k;
    for (int st = 0; st < 2; st++) {
        gpt2_job_dtype(&s, st ? PAR_FSDP1 : PAR_FSDP, 4, DT_F32);
        s.parallel.cpu_offload = true;
        s.parallel.mp.param_dtype = DT_BF16 + 1;
        const char *name = st ? "FSDP1" : "FSDP2";
        ok(run(&s, &k) == 0 && live_sink_consistent(&k), "%s with cpu_offload runs, consistent", name);
        is_int(cat_at(&k, "forward", 0, CAT_PARAM), 0, "%s: no shard on the device", name);
        is_int(cat_at(&k, "backward", 0, CAT_PARAM), 2 * (GPT2_ROOT + GPT2_BLOCK),
               "%s: only the gathered root and last block (bf16)", name);
        is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 0, "%s: sharded gradients copied to the host", name);
        is_int(cat_at(&k, "forward", 1, CAT_OPTIMIZER_STATE), 0, "%s: the optimizer steps on the host", name);
        live_sink_fini(&k);
    }
}

/* NCCL's ring buffers per rank: per channel a receive connection of ncclRecvMem + LL + LL128 + Simple and a
 * send connection of ncclSendMem, each rounded up to 2 MiB. */
static void test_nccl(void)
{
    struct job_spec s;
    gpt2_job_dtype(&s, PAR_FSDP1, 4, DT_BF16);
    struct nccl_conn c = nccl_connections(&s.parallel);
    ok(4096 + 524288 + 4915200 + 4194304 == 9637888, "receive connection: 4,096 + 524,288 + 4,915,200 + 4 MiB");
    is_int(c.recv, 10485760, "rounded up to 2 MiB: 10 MiB");
    is_int(c.send, 2097152, "send connection: 4,096 B rounded up to 2 MiB");
    is_int(c.total, 25165824, "2 channels: 24 MiB");
    s.parallel.nccl_buffsize = 1 << 20; /* NCCL's default on ARM CPUs */
    s.parallel.nccl_channels = 8;
    c = nccl_connections(&s.parallel);
    is_int(c.recv, 8388608, "NCCL_BUFFSIZE 1 MiB: 6,492,160 B, rounded up to 8 MiB");
    is_int(c.total, 8 * (8388608 + 2097152), "8 channels: 80 MiB");
    s.parallel.nccl_transport = NCCL_SHM;
    is_int(nccl_connections(&s.parallel).total, 0, "shm: the buffers are in host memory");
    gpt2_job_dtype(&s, PAR_FSDP1, 1, DT_BF16);
    is_int(nccl_connections(&s.parallel).total, 0, "one rank: no peers, no buffers");
    gpt2_job_dtype(&s, PAR_NONE, 4, DT_BF16);
    is_int(nccl_connections(&s.parallel).total, 0, "no job.parallel: none");
    struct job_assumptions a;
    struct err e = {0};
    gpt2_job_dtype(&s, PAR_DDP, 4, DT_BF16);
    ok(workload_assumptions(&s, &a, &e) == 0 && a.nccl_bytes == 25165824 && a.nccl_channels == 2,
       "the run's report carries them apart from the allocator's figures");
}

static void refused(struct job_spec *s, const char *want, const char *what)
{
    struct err e = {0};
    ok(job_spec_validate(s, &e) < 0 && strstr(e.msg, want), "%s: %s", what, e.msg);
}

static void test_checks(void)
{
    struct job_spec s;
    gpt2_job_dtype(&s, PAR_DDP, 4, DT_BF16);
    s.parallel.mp.param_dtype = DT_BF16 + 1;
    refused(&s, "parallel.mixed_precision", "mixed_precision with ddp");
    gpt2_job_dtype(&s, PAR_ZERO3, 4, DT_BF16);
    s.parallel.cpu_offload = true;
    refused(&s, "parallel.cpu_offload", "cpu_offload with zero3");
    gpt2_job_dtype(&s, PAR_FSDP, 4, DT_BF16);
    s.parallel.use_orig_params = true;
    refused(&s, "parallel.use_orig_params", "use_orig_params with fsdp");
    gpt2_job_dtype(&s, PAR_FSDP, 4, DT_BF16);
    s.parallel.backward_prefetch = BWD_PREFETCH_POST;
    refused(&s, "parallel.backward_prefetch", "backward_prefetch with fsdp");
    gpt2_job_dtype(&s, PAR_FSDP1, 4, DT_BF16);
    s.parallel.forward_prefetch = 2;
    refused(&s, "parallel.forward_prefetch", "fsdp1 prefetching 2 units");
    gpt2_job_dtype(&s, PAR_FSDP1, 4, DT_BF16);
    s.trainable = TRAIN_LORA;
    refused(&s, "use_orig_params: true", "fsdp1 LoRA without use_orig_params");
    s.parallel.use_orig_params = s.parallel.cpu_offload = true;
    refused(&s, "parallel.cpu_offload: fsdp1 with trainable lora", "fsdp1 LoRA with cpu_offload");
    gpt2_job_dtype(&s, PAR_DDP, 4, DT_BF16);
    s.parallel.nccl_buffsize = 1024;
    refused(&s, "parallel.nccl_buffsize", "NCCL_BUFFSIZE of 1 KiB");
}

int main(void)
{
    test_fsdp1_flat();
    test_fsdp1_prefetch();
    test_fsdp1_alignment();
    test_fsdp1_lora();
    test_mixed_precision();
    test_cpu_offload();
    test_nccl();
    test_checks();
    workload_destroy(last);
    done_testing();
}
