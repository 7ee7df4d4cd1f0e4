/* device_kind_test.c: the device-kind table, row by row: each kind's name, forms and flags; the one
 * parser of device specs on good specs (the fields it fills) and bad ones (the exact message); opening
 * sim and host (names, what the name leaves out, how kernel time is obtained, the cuBLAS workspace
 * rule, which optional ops exist); the sim's roofline with worked numbers and its forced placement;
 * a host kernel measured by its clock; each kind's probe; and cuda failing with its reason where no
 * GPU is usable. */
#include <string.h>

#include "device/cuda_loader.h"
#include "device/host.h"
#include "device/sim.h"
#include "kernels.h"
#include "tap.h"

#define ALL_FORMS "sim, sim:PROFILE, sim:SIZE, sim:gpuN, host, host:SIZE, host:FRACTION, cuda, cuda:N, cuda:auto"

static void table_rows(void)
{
    is_int((int)device_kind_count(), 3, "three kinds of device");
    static const struct {
        const char *name, *forms;
        unsigned flags;
    } want[] = {
        {"sim", "sim, sim:PROFILE, sim:SIZE, sim:gpuN", DEVICE_DETERMINISTIC_PLACEMENT | DEVICE_ASYNC_KERNELS},
        {"host", "host, host:SIZE, host:FRACTION", DEVICE_MEASURED | DEVICE_RUNS_KERNELS | DEVICE_DETERMINISTIC_PLACEMENT},
        {"cuda", "cuda, cuda:N, cuda:auto", DEVICE_MEASURED | DEVICE_RUNS_KERNELS | DEVICE_ASYNC_KERNELS},
    };
    for (size_t i = 0; i < 3; i++) {
        const struct device_kind *k = device_kind_at(i);
        if (!ok(k != NULL, "row %zu exists", i))
            continue;
        is_str(k->name, want[i].name, "row %zu is %s", i, want[i].name);
        is_str(k->forms, want[i].forms, "%s: its forms", k->name);
        is_int((int)k->flags, (int)want[i].flags, "%s: its flags", k->name);
        ok(k->parse && k->probe && k->open, "%s: parse, probe and open", k->name);
    }
    ok(device_kind_at(3) == NULL, "nothing past the last row");
}

static struct device_spec parsed(const char *text, const struct device_kind *kind)
{
    struct device_spec s;
    struct err e = {0};
    ok(device_spec_parse(text, &s, &e) == 0 && s.kind == kind, "'%s' parses as %s%s%s", text, kind->name,
       e.msg[0] ? ": " : "", e.msg);
    is_str(s.text, text, "  and keeps its text");
    return s;
}

static void good_specs(void)
{
    const struct gpu_profile *dflt = gpu_profile_default();
    is_str(dflt->name, GPU_PROFILE_DEFAULT, "the default profile is " GPU_PROFILE_DEFAULT);
    is_str(DEVICE_DEFAULT, "sim:rtx5090", "the default device is the simulated RTX 5090");
    struct device_spec s = parsed("sim", &sim_device_kind);
    ok(s.profile == dflt && s.own.bytes == 0, "sim: the default profile, its own total");
    s = parsed("sim:rtx4090", &sim_device_kind);
    ok(s.profile == gpu_profile_find("rtx4090") && s.own.bytes == 0, "sim:rtx4090: that profile");
    s = parsed("sim:24GiB", &sim_device_kind);
    ok(s.profile == dflt && s.own.bytes == 24ULL << 30 && s.cuda_major == 0,
       "sim:24GiB: 25769803776 bytes of the default architecture, today's stack");
    s = parsed("sim:v100-16@cuda11.2", &sim_device_kind);
    ok(s.profile == gpu_profile_find("v100-16") && s.cuda_major == 11 && s.cuda_minor == 2,
       "sim:v100-16@cuda11.2: that profile under CUDA 11.2");
    s = parsed("sim:24GiB@cuda13", &sim_device_kind);
    ok(s.profile == dflt && s.own.bytes == 24ULL << 30 && s.cuda_major == 13 && s.cuda_minor == 0,
       "sim:24GiB@cuda13: a bare size under CUDA 13.0");
    s = parsed("host", &host_device_kind);
    ok(s.own.bytes == 0 && s.own.fraction == 0.0, "host: the default capacity");
    s = parsed("host:25%", &host_device_kind);
    ok(s.own.fraction == 0.25, "host:25%%: a quarter of the host's memory");
    s = parsed("host:2GiB", &host_device_kind);
    ok(s.own.bytes == 2ULL << 30, "host:2GiB: 2147483648 bytes");
    s = parsed("cuda", &cuda_device_kind);
    is_int(s.ordinal, 0, "cuda: GPU 0");
    s = parsed("cuda:1", &cuda_device_kind);
    is_int(s.ordinal, 1, "cuda:1: GPU 1");
}

static void bad_specs(void)
{
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"", "unknown device '' (devices: " ALL_FORMS ")"},
        {"tpu", "unknown device 'tpu' (devices: " ALL_FORMS ")"},
        {"simx", "unknown device 'simx' (devices: " ALL_FORMS ")"},
        {"SIM", "unknown device 'SIM' (devices: " ALL_FORMS ")"},
        {"sim:", "nothing after the ':' in 'sim:'"},
        {"host:", "nothing after the ':' in 'host:'"},
        {"sim:rtx5095", "unknown GPU profile 'rtx5095' (did you mean 'rtx5090'?)"},
        {"sim:quadro", "unknown GPU profile 'quadro' (known: rtx5090, rtx4090, a100-40, a100-80, h100, h200, l4, t4, "
                       "rtx3090, rtx4080, rtx5080, rtx5070ti, rtx-a6000, rtx-pro-6000, l40s, a10g, v100-16, v100-32, "
                       "b200)"},
        {"sim:v100-16@cuda", "'@cuda' is not a CUDA version: write @cudaMAJOR.MINOR, e.g. @cuda11.2"},
        {"sim:v100-16@rocm6.2", "'@rocm6.2' is not a CUDA version: write @cudaMAJOR.MINOR, e.g. @cuda11.2"},
        {"sim:v100-16@cuda11.x", "'@cuda11.x' is not a CUDA version: write @cudaMAJOR.MINOR, e.g. @cuda11.2"},
        {"sim:v100-16@cuda11.2.1", "'@cuda11.2.1' is not a CUDA version: write @cudaMAJOR.MINOR, e.g. @cuda11.2"},
        {"sim:@cuda11.2", "expected a profile or a size before '@cuda11.2'"},
        {"sim:v100-64@cuda11.2", "unknown GPU profile 'v100-64' (did you mean 'v100-16'?)"},
        {"sim:1GiB@cuda11.2", "a 1024.00 MiB card cannot hold the 1.31 GiB CUDA context of the rtx5090 architecture a bare "
                              "size takes (a size given with --capacity has none)"},
        {"sim:0", "a device of 0 bytes"},
        {"sim:400MiB", "a 400.00 MiB card cannot hold the 426.00 MiB CUDA context of the rtx5090 architecture a bare "
                       "size takes (a size given with --capacity has none)"},
        {"sim:12 parsecs", "size '12 parsecs' has an unknown unit 'parsecs' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"},
        {"host:0", "capacity '0' is zero"},
        {"host:150%", "capacity '150%' is not a percentage in (0, 100]"},
        {"cuda:x", "'x' is not a CUDA device number or 'auto'"},
        {"cuda:-1", "'-1' is not a CUDA device number or 'auto'"},
        {"cuda:1x", "'1x' is not a CUDA device number or 'auto'"},
        {"cuda:99999999999", "'99999999999' is not a CUDA device number or 'auto'"},
        {"sim:rtx5090-with-a-name-far-longer-than-any-device-spec-could-be", "a device spec is at most 63 characters"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct device_spec s;
        struct err e = {0};
        ok(device_spec_parse(bad[i].text, &s, &e) == -1 && e.code == ERR_INPUT, "'%s' is refused as bad input",
           bad[i].text);
        is_str(e.msg, bad[i].msg, "  with its reason");
    }
    struct err e = {0};
    ok(device_open("tpu", NULL, &e) == NULL && e.code == ERR_INPUT, "device_open refuses 'tpu'");
    is_str(e.msg, "device tpu: unknown device 'tpu' (devices: " ALL_FORMS ")", "  naming the spec");
}

static struct device *opened(const char *text, uint64_t job_workspace)
{
    struct err e = {0};
    struct device *d = device_open(text, &(struct device_open_options){.cublas_workspace_bytes = job_workspace}, &e);
    ok(d != NULL, "%s opens%s%s", text, e.msg[0] ? ": " : "", e.msg);
    return d;
}

/* A kernel_call of `kernel` on distinct tensors 1, 2, 3 ... */
static struct kernel_call call(unsigned kernel, enum dtype dt, int ntensors)
{
    struct kernel_call k = {.kernel = (uint16_t)kernel, .dtype = (uint8_t)dt, .ntensors = (uint8_t)ntensors};
    for (int i = 0; i < ntensors; i++)
        k.tensors[i] = (uint64_t)i + 1;
    return k;
}

/* The device's launch, given the call's cost as the runner gives it. */
static int launch(struct device *d, const struct kernel_call *k, const uint64_t *addrs, struct err *e)
{
    const struct kernel_cost cost = kernel_cost(k);
    return d->ops->launch(d, k, &cost, addrs, e);
}

static double launch_time(struct device *d, struct kernel_call k)
{
    struct err e = {0};
    ok(launch(d, &k, NULL, &e) == 0, "%s: %s launches%s", d->name, kernel_get(k.kernel)->name, e.msg);
    return d->ops->kernel_seconds(d);
}

/* Kernel time on the rtx5090 (kernel_time.h, worked numbers in device_kernel_time_test.c): the GPU
 * starts each kernel once the host has issued it (8 us per op today) and the previous one is done;
 * kernel_seconds synchronises. */
static void sim_kernel_time(struct device *d)
{
    struct kernel_call g = call(K_GEMM, DT_BF16, 3);
    g.dims[0] = g.dims[1] = g.dims[2] = 4096;
    g.fparam[0] = 1.0f;
    const double gemm = 5.75e-6 + 137438953472.0 / 242.18e12, host = 8e-6;
    double t = launch_time(d, g);
    ok(t > host + gemm - 1e-12 && t < host + gemm + 1e-12,
       "bf16 GEMM 4096^3 on the rtx5090: issued after 8 us, then 573.26 us at its measured rate: %.12f s", t);
    struct kernel_call f = call(K_FILL, DT_F32, 1);
    f.dims[0] = 1LL << 28;
    const double fill = (double)(1ULL << 30) / (1792e9 * 0.86);
    struct err e = {0};
    ok(launch(d, &g, NULL, &e) == 0 && launch(d, &f, NULL, &e) == 0, "a GEMM, then a fill");
    t = d->ops->kernel_seconds(d);
    ok(t > host + gemm + fill - 1e-12 && t < host + gemm + fill + 1e-12,
       "the fill is issued while the GEMM runs and follows it: %.12f s", t);
    ok(d->ops->kernel_seconds(d) == 0.0, "and then the count starts again from 0");
    f.dims[0] = 16;
    for (int i = 0; i < 100; i++)
        launch(d, &f, NULL, &e);
    t = d->ops->kernel_seconds(d);
    ok(t > 100 * host + 2e-6 - 1e-12 && t < 100 * host + 2e-6 + 1e-12,
       "100 tiny fills are host-bound: 100 x 8 us to issue, the last one's 2 us: %.9f s", t);
}

static void sim_placement(struct device *d)
{
    struct err e = {0};
    uint64_t a = 0, b = 0, c = 0;
    const uint64_t forced[] = {0x7f0000000000ULL};
    ok(d->ops->seg_alloc(d, 2 * MiB, 0, &a, &e) == DEV_OK, "a segment");
    is_u64(a, 1ULL << 40, "  at 2^40, the first base");
    ok(d->ops->place_next(d, forced, 1, &e) == 0, "place_next: the next segment's address");
    ok(d->ops->seg_alloc(d, 2 * MiB, 0, &b, &e) == DEV_OK && b == forced[0], "  is taken (0x%llx)",
       (unsigned long long)b);
    ok(d->ops->seg_alloc(d, 2 * MiB, 0, &c, &e) == DEV_OK && c == forced[0] + 2 * MiB + GiB,
       "  then the policy resumes above it, 1 GiB apart (0x%llx)", (unsigned long long)c);
}

static void open_sim(void)
{
    struct device *d = opened("sim", 0);
    if (d) {
        is_str(d->name, "sim:rtx5090", "sim is named after its profile");
        is_str(d->detail, "", "  and its name says it all");
        is_str(d->timed_by,
               "kernel-time model for Blackwell (consumer and workstation) (rtx5090), calibrated on RTX 5090/PRO 6000 "
               "matmul (zzc0721); bandwidth as Ada, fused attention as Ampere",
               "  its kernel time is the kernel-time model, naming its architecture's calibration");
        is_u64(d->cublas_workspace_bytes, 32 * MiB, "  its cuBLAS workspace is Blackwell's 32 MiB");
        ok(device_has(d, DEVICE_DETERMINISTIC_PLACEMENT | DEVICE_ASYNC_KERNELS) && !device_has(d, DEVICE_MEASURED) &&
               !device_has(d, DEVICE_RUNS_KERNELS),
           "  modelled, deterministic placement, asynchronous launches, kernels not run");
        ok(d->ops->launch && d->ops->kernel_seconds && d->ops->place_next && !d->ops->set_workspace && !d->ops->sync,
           "  launch, kernel_seconds and place_next; no workspaces, nothing to wait for");
        sim_kernel_time(d);
        sim_placement(d);
        d->ops->destroy(d);
    }
    if ((d = opened("sim:t4", 0))) {
        is_u64(d->cublas_workspace_bytes, 8519680, "sim:t4: Turing's cuBLAS workspace, 8,519,680 B");
        ok(strstr(d->timed_by, "kernel-time model for Turing (t4), calibrated on T4 matmul") == d->timed_by,
           "  timed with Turing's calibration: %s", d->timed_by);
        d->ops->destroy(d);
    }
    if ((d = opened("sim:24GiB", 0))) {
        is_str(d->name, "sim:24GiB", "a bare size keeps its name");
        is_str(d->detail,
               "rtx5090 architecture: its rates, kernel-time calibration, cuBLAS workspace and 426.00 MiB CUDA context",
               "  and says whose architecture it has");
        is_u64(d->cublas_workspace_bytes, 32 * MiB, "  the rtx5090's cuBLAS workspace");
        ok(strstr(d->timed_by, "kernel-time model for Blackwell (consumer and workstation) (rtx5090)") == d->timed_by,
           "  and calibration");
        d->ops->destroy(d);
    }
    if ((d = opened("sim:v100-16@cuda11.2", 0))) {
        uint64_t free_bytes = 0, total = 0;
        d->ops->mem_info(d, &free_bytes, &total);
        is_str(d->name, "sim:v100-16@cuda11.2", "a CUDA version stays in the name");
        ok(total == 16160 * MiB && total - free_bytes == 1343 * MiB,
           "  16160 MiB, of which CUDA 11.2's eager-loading context takes 1343 MiB");
        ok(strstr(d->timed_by, "kernel-time model for Volta (v100-16, PyTorch 1.x, eager module loading)") == d->timed_by,
           "  timed with that stack's host time: %s", d->timed_by);
        d->ops->destroy(d);
    }
    if ((d = opened("sim:v100-16@cuda12.4", 0))) {
        uint64_t free_bytes = 0, total = 0;
        d->ops->mem_info(d, &free_bytes, &total);
        is_u64(total - free_bytes, 287047680, "sim:v100-16@cuda12.4: lazy loading's 287,047,680 B context");
        d->ops->destroy(d);
    }
    if ((d = opened("sim:24GiB", 4 * MiB))) {
        is_u64(d->cublas_workspace_bytes, 4 * MiB, "a job's own cuBLAS workspace wins over the device's");
        d->ops->destroy(d);
    }
}

static void open_host(void)
{
    struct device *d = opened("host:64MiB", 0);
    if (!d)
        return;
    is_str(d->name, "host", "host is host");
    is_u64(d->total, 64 * MiB, "  of 64 MiB");
    is_str(d->timed_by, "CLOCK_MONOTONIC around each CPU kernel", "  timed by its clock");
    is_u64(d->cublas_workspace_bytes, 8519680, "  PyTorch's cuBLAS workspace before Hopper");
    ok(device_has(d, DEVICE_MEASURED | DEVICE_RUNS_KERNELS | DEVICE_DETERMINISTIC_PLACEMENT) &&
           !device_has(d, DEVICE_ASYNC_KERNELS),
       "  measured, runs kernels one by one, deterministic placement");
    ok(d->ops->launch && d->ops->kernel_seconds && !d->ops->place_next && !d->ops->set_workspace,
       "  no forced addresses, no library workspaces");
    struct err e = {0};
    uint64_t addr = 0;
    const int64_t n = 1 << 22;
    if (ok(d->ops->seg_alloc(d, (uint64_t)n * 4, 0, &addr, &e) == DEV_OK, "a 16 MiB segment")) {
        struct kernel_call f = call(K_FILL, DT_F32, 1);
        f.dims[0] = n;
        f.fparam[0] = 1.5f;
        ok(launch(d, &f, &addr, &e) == 0, "fill runs on it%s", e.msg);
        float last;
        memcpy(&last, host_device_pointer(d, addr + (uint64_t)(n - 1) * 4), sizeof last);
        ok(last == 1.5f, "  for real: the last element is 1.5");
        double t = d->ops->kernel_seconds(d);
        ok(t > 0 && t < 10, "  and took %.6f s by the clock", t);
        ok(d->ops->kernel_seconds(d) == 0.0, "  after which the count starts again");
        d->ops->seg_free(d, addr, (uint64_t)n * 4);
    }
    d->ops->destroy(d);
}

static void probes(void)
{
    struct device_probe p;
    sim_device_kind.probe(&p);
    ok(p.available, "sim is always available");
    is_str(p.capacity, "31.51 GiB", "  with the default profile's capacity");
    ok(strstr(p.notes, "sim:SIZE (a card of that total with the rtx5090's rates, kernel-time calibration, cuBLAS "
                       "workspace and 426.00 MiB CUDA context); @cudaX.Y after either takes that CUDA version's "
                       "context") != NULL,
       "  and says what a bare size is: %s", p.notes);
    host_device_kind.probe(&p);
    char half[32];
    size_format_pytorch(host_memory_bytes(NULL) / 2, half, sizeof half);
    ok(p.available == (host_memory_bytes(NULL) > 0), "host is available where the memory size is known");
    is_str(p.capacity, half, "  with half of it by default");
    char why[512] = "";
    int gpus = cuda_probe(NULL, why, sizeof why);
    cuda_device_kind.probe(&p);
    ok(p.available == (gpus > 0), "cuda is available exactly when the plugin finds a GPU (%d)", gpus);
    if (gpus > 0)
        return;
    ok(!strncmp(p.notes, "unavailable: ", 13) && strstr(p.notes, why), "  otherwise it says why: %s", p.notes);
    struct err e = {0};
    ok(device_open("cuda:0", NULL, &e) == NULL && e.code == ERR_INPUT && strstr(e.msg, "cuda:0 unavailable: ") &&
           strstr(e.msg, why),
       "opening cuda:0 fails with that reason: %s", e.msg);
}

int main(void)
{
    table_rows();
    good_specs();
    bad_specs();
    open_sim();
    open_host();
    probes();
    return done_testing();
}
