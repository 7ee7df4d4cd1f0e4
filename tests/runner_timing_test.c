/* runner_timing_test.c: the runner takes kernel time from the device, as the device's flags say. A
 * stand-in GPU (the sim's memory, a kind of its own) charges each launch 1 ms: when its kind says
 * launches are asynchronous the runner reads the time only at phase and step boundaries and at the
 * end (7 readings for the program below), otherwise after every launch too (17); either way each
 * phase and step gets exactly its kernels' time, the runner passes tensor addresses because the kind
 * runs kernels, figures are measured and the wall clock is kept beside them. The device's library
 * workspace comes from the runner's allocator (category workspace) and goes back at runner_destroy; it is
 * the program's own workspace block where one is free. */
#include <string.h>

#include "device/sim.h"
#include "kernels.h"
#include "run/runner.h"
#include "tap.h"

struct stand_in {
    const struct device_ops *inner;
    struct device_ops ops;
    double pending;            /* seconds launched since the last reading */
    int readings, launches;
    int launches_with_addrs;   /* launches given the address of tensor 1's block */
    uint64_t t1_addr;
    struct device_workspace ws; /* as the runner set it */
    uint64_t ws_addr;
    int workspace_sets, workspace_clears, workspace_frees;
};

static struct stand_in gpu;

static int launch(struct device *d, const struct kernel_call *k, const struct kernel_cost *cost, const uint64_t *addrs,
                  struct err *e)
{
    gpu.launches++;
    gpu.pending += 0.001;
    gpu.launches_with_addrs += addrs && addrs[0] && addrs[0] == gpu.t1_addr;
    if (!gpu.ws_addr && gpu.ws.alloc && gpu.ws.alloc(gpu.ws.user, MiB, 0, &gpu.ws_addr)) /* as cuBLAS's, once */
        return err_set(e, ERR_INTERNAL, "no workspace");
    return 0;
}

static double kernel_seconds(struct device *d)
{
    double t = gpu.pending;
    gpu.pending = 0;
    gpu.readings++;
    return t;
}

static void set_workspace(struct device *d, const struct device_workspace *ws)
{
    if (gpu.ws_addr) {
        gpu.ws.free(gpu.ws.user, gpu.ws_addr);
        gpu.ws_addr = 0;
        gpu.workspace_frees++;
    }
    gpu.ws = ws ? *ws : (struct device_workspace){0};
    ws ? gpu.workspace_sets++ : gpu.workspace_clears++;
}

static int emit(struct runner *r, struct op op)
{
    struct err e = {0};
    int rc = runner_sink(r)->emit(runner_sink(r), &op, &e);
    if (rc)
        diag("op %d: %s", (int)op.kind, e.msg);
    return rc;
}

static struct op kernel(void)
{
    struct op op = {.kind = OP_KERNEL, .name = "k"};
    op.kernel = (struct kernel_call){.kernel = K_FILL, .dtype = DT_F32, .ntensors = 1, .dims = {1024}, .tensors = {1}};
    return op;
}

static struct op phase(const char *name)
{
    return (struct op){.kind = OP_PHASE, .name = name};
}

/* Two steps: forward 3 kernels, backward 2; forward 1, eval 4. */
static int program(struct runner *r)
{
    int rc = emit(r, (struct op){.kind = OP_STEP, .id = 1, .bytes = 4});
    rc |= emit(r, phase("forward"));
    rc |= emit(r, (struct op){.kind = OP_ALLOC, .id = 1, .bytes = 4096, .category = CAT_ACTIVATION, .name = "t1"});
    for (int i = 0; i < 3; i++)
        rc |= emit(r, kernel());
    rc |= emit(r, phase("backward"));
    for (int i = 0; i < 2; i++)
        rc |= emit(r, kernel());
    rc |= emit(r, (struct op){.kind = OP_STEP, .id = 2, .bytes = 4});
    rc |= emit(r, phase("forward"));
    rc |= emit(r, kernel());
    rc |= emit(r, phase("eval"));
    for (int i = 0; i < 4; i++)
        rc |= emit(r, kernel());
    return rc;
}

static double phase_seconds(const struct run_result *res, const char *name)
{
    for (size_t i = 0; i < res->nphases; i++)
        if (!strcmp(res->phases[i].name, name))
            return res->phases[i].seconds;
    return -1;
}

static bool near(double got, double want)
{
    return got > want - 1e-12 && got < want + 1e-12;
}

static void run(const char *what, unsigned flags, int readings)
{
    const struct device_kind kind = {.name = "stand-in", .flags = flags};
    struct device *d = sim_device_create("stand-in", GiB, 0, NULL);
    gpu = (struct stand_in){.inner = d->ops, .ops = *d->ops};
    gpu.ops.launch = launch;
    gpu.ops.kernel_seconds = kernel_seconds;
    gpu.ops.set_workspace = set_workspace;
    d->ops = &gpu.ops;
    d->kind = &kind;
    gpu.t1_addr = 1ULL << 40; /* the sim places the first segment at 2^40 */
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    struct runner *r = runner_create(d, &cfg, NULL);
    is_int(gpu.workspace_sets, 1, "%s: runner_create points the device's workspaces at the runner", what);
    ok(program(r) == 0, "%s: the program runs", what);
    struct run_result res;
    runner_finish(r, &res);
    is_int(gpu.readings, readings, "%s: kernel time read %d times", what, readings);
    is_int(gpu.launches, 10, "%s: 10 launches", what);
    is_int(gpu.launches_with_addrs, 10, "%s: each given tensor 1's address, as the kind runs kernels", what);
    ok(near(phase_seconds(&res, "forward"), 0.004) && near(phase_seconds(&res, "backward"), 0.002) &&
           near(phase_seconds(&res, "eval"), 0.004),
       "%s: forward 4 ms, backward 2 ms, eval 4 ms (%.6f, %.6f, %.6f)", what, phase_seconds(&res, "forward"),
       phase_seconds(&res, "backward"), phase_seconds(&res, "eval"));
    ok(near(res.kernel_seconds, 0.010), "%s: 10 ms of kernels in all", what);
    is_int((int)res.steps_timed, 2, "%s: two steps timed", what);
    ok(near(res.step_seconds_min, 0.001) && near(res.step_seconds_max, 0.005) && near(res.step_seconds_median, 0.003),
       "%s: steps of 5 ms and 1 ms (eval apart): median 3 ms", what);
    ok(res.measured, "%s: figures measured, as the kind says", what);
    ok(res.step_wall_seconds_max > 0 && res.step_wall_seconds_min <= res.step_wall_seconds_max &&
           res.wall_seconds >= res.step_wall_seconds_min + res.step_wall_seconds_max,
       "%s: wall clock beside it: steps %.6f-%.6f s within the run's %.6f s", what, res.step_wall_seconds_min,
       res.step_wall_seconds_max, res.wall_seconds);
    is_u64(res.category_at_peak[CAT_WORKSPACE], MiB, "%s: the device's 1 MiB workspace counts as workspace", what);
    runner_destroy(r);
    ok(gpu.workspace_clears == 1 && gpu.workspace_frees == 1,
       "%s: runner_destroy takes the workspace back while its allocator lives", what);
    d->ops = gpu.inner;
    d->ops->destroy(d);
}

/* Records each allocation's block address by id. */
struct addresses {
    struct run_observer base; /* first */
    uint64_t addr[8];
};

static int note_address(struct run_observer *o, struct runner *r, const struct op *op, const struct alloc_block *b,
                        struct err *e)
{
    if (b && op->id < 8)
        ((struct addresses *)o)->addr[op->id] = alloc_block_addr(b);
    return 0;
}

/* A library workspace is the program's own where one is free: the first allocated of the workspace blocks large
 * enough and not lent already; when none is, a block of its own. Tensor 1 (1 MiB) is too small for 2 MiB,
 * tensor 6 (4 MiB, allocated before tensor 5, which the live index holds first) is lent first, then tensor 5;
 * the third request gets a new block. */
static void lending(void)
{
    struct device *d = sim_device_create("stand-in", GiB, 0, NULL);
    gpu = (struct stand_in){.inner = d->ops, .ops = *d->ops};
    gpu.ops.set_workspace = set_workspace;
    d->ops = &gpu.ops;
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    struct runner *r = runner_create(d, &cfg, NULL);
    struct addresses seen = {.base = {.on_op = note_address}};
    runner_add_observer(r, &seen.base);
    int rc = emit(r, (struct op){.kind = OP_ALLOC, .id = 1, .bytes = MiB, .category = CAT_WORKSPACE, .name = "w"});
    rc |= emit(r, (struct op){.kind = OP_ALLOC, .id = 6, .bytes = 4 * MiB, .category = CAT_WORKSPACE, .name = "w"});
    rc |= emit(r, (struct op){.kind = OP_ALLOC, .id = 3, .bytes = 4 * MiB, .category = CAT_ACTIVATION, .name = "a"});
    rc |= emit(r, (struct op){.kind = OP_ALLOC, .id = 5, .bytes = 4 * MiB, .category = CAT_WORKSPACE, .name = "w"});
    ok(rc == 0, "lending: four allocations, three of them workspaces");
    uint64_t a = 0, b = 0, c = 0;
    ok(gpu.ws.alloc(gpu.ws.user, 2 * MiB, 0, &a) == 0 && a == seen.addr[6], "the first 2 MiB: tensor 6's block");
    ok(gpu.ws.alloc(gpu.ws.user, 2 * MiB, 0, &b) == 0 && b == seen.addr[5], "the second: tensor 5's");
    const uint64_t *live = runner_category_live(r);
    uint64_t before = live[CAT_WORKSPACE];
    ok(gpu.ws.alloc(gpu.ws.user, 2 * MiB, 0, &c) == 0 && c != seen.addr[1] && c != a && c != b &&
           live[CAT_WORKSPACE] == before + 2 * MiB,
       "the third: a block of its own, 2 MiB more workspace");
    gpu.ws.free(gpu.ws.user, c);
    gpu.ws.free(gpu.ws.user, b);
    gpu.ws.free(gpu.ws.user, a);
    is_u64(live[CAT_WORKSPACE], before, "given back: the program's blocks stay, the own one goes");
    runner_destroy(r);
    d->ops = gpu.inner;
    d->ops->destroy(d);
}

int main(void)
{
    run("asynchronous", DEVICE_MEASURED | DEVICE_RUNS_KERNELS | DEVICE_ASYNC_KERNELS, 7);
    run("synchronous", DEVICE_MEASURED | DEVICE_RUNS_KERNELS, 17);
    lending();
    return done_testing();
}
