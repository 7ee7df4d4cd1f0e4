/* host_run_test.c: small training jobs end to end on the host device (every kernel run for real by
 * the CPU code on real data: seeded weights and inputs), then the same jobs on the sim device: the
 * loss is finite and changes across steps, and the allocator's memory_stats (every key), peaks,
 * per-category and per-phase figures and the device's segment events (offsets from the first
 * segment, sizes) are identical on both, since the host places segments by the sim's policy. The
 * runner takes each device's word for its kernel time: measured by the host (and its wall clock
 * beside it), modelled by the sim.
 * Jobs: a tiny GPT-2 style transformer (AdamW, dropout) and a tiny UNet with a VAE on the device
 * (latents encoded each step, EMA, eval with sampling and a VAE decode). */
#include <math.h>

#include "alloc/allocator.h"
#include "device/host.h"
#include "device/sim.h"
#include "elementwise.h"
#include "kernels.h"
#include "run/runner.h"
#include "tap.h"
#include "workload/generate.h"

#define CAPACITY (1ULL << 30)
#define MAX_EVENTS 4096
#define MAX_LOSSES 16

enum seg_kind { SEG_ALLOC, SEG_FREE, SEG_MAP, SEG_UNMAP };

struct seg_event {
    enum seg_kind kind;
    uint64_t offset, size;
};

/* What one run records through the device's ops: segment events and the losses the kernels compute. */
struct probe {
    const struct device_ops *inner;
    struct device_ops ops;
    uint64_t base;
    struct seg_event events[MAX_EVENTS];
    size_t nevents;
    double losses[MAX_LOSSES];
    size_t nlosses;
};

static struct probe *probe; /* the run in progress (one at a time) */

static void record(enum seg_kind kind, uint64_t addr, uint64_t size)
{
    if (!probe->base)
        probe->base = addr;
    if (probe->nevents < MAX_EVENTS)
        probe->events[probe->nevents++] = (struct seg_event){kind, addr - probe->base, size};
}

static enum dev_status seg_alloc(struct device *d, uint64_t size, int stream, uint64_t *addr, struct err *e)
{
    enum dev_status st = probe->inner->seg_alloc(d, size, stream, addr, e);
    if (st == DEV_OK)
        record(SEG_ALLOC, *addr, size);
    return st;
}

static void seg_free(struct device *d, uint64_t addr, uint64_t size)
{
    record(SEG_FREE, addr, size);
    probe->inner->seg_free(d, addr, size);
}

static enum dev_status map(struct device *d, uint64_t addr, uint64_t size, struct err *e)
{
    enum dev_status st = probe->inner->map(d, addr, size, e);
    if (st == DEV_OK)
        record(SEG_MAP, addr, size);
    return st;
}

static void unmap(struct device *d, uint64_t addr, uint64_t size)
{
    record(SEG_UNMAP, addr, size);
    probe->inner->unmap(d, addr, size);
}

/* A training loss is the mean of a kernel's [1] result: K_REDUCE_SUM with outer = inner = 1 (on a device that
 * runs kernels: the sim gets no addresses). */
static int launch(struct device *d, const struct kernel_call *k, const struct kernel_cost *cost, const uint64_t *addrs,
                  struct err *e)
{
    int rc = probe->inner->launch(d, k, cost, addrs, e);
    if (rc == 0 && addrs && k->kernel == K_REDUCE_SUM && k->dims[0] == 1 && k->dims[2] == 1 && addrs[1] &&
        probe->nlosses < MAX_LOSSES) {
        const void *p = host_device_pointer(d, addrs[1]);
        float v;
        if (k->dtype == DT_F32) {
            memcpy(&v, p, sizeof v);
        } else {
            uint16_t h;
            memcpy(&h, p, sizeof h);
            v = k->dtype == DT_BF16 ? oom_bf16_to_f32(h) : oom_f16_to_f32(h);
        }
        probe->losses[probe->nlosses++] = v;
    }
    return rc;
}

static void attach(struct probe *p, struct device *d)
{
    memset(p, 0, sizeof *p);
    p->inner = d->ops;
    p->ops = *d->ops;
    p->ops.seg_alloc = seg_alloc;
    p->ops.seg_free = seg_free;
    if (p->ops.map) {
        p->ops.map = map;
        p->ops.unmap = unmap;
    }
    if (p->ops.launch)
        p->ops.launch = launch;
    d->ops = &p->ops;
    probe = p;
}

/* Runs the job on dev; 0 or -1. */
static int run_on(struct device *dev, const struct job_spec *spec, struct probe *p, struct run_result *res)
{
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    attach(p, dev);
    struct runner *r = runner_create(dev, &cfg, NULL);
    struct err e = {0};
    struct workload *w = r ? workload_create(spec, &e) : NULL;
    int rc = w ? workload_run(w, runner_sink(r), &e) : -1;
    if (rc)
        diag("%s: %s", dev->name, e.msg);
    if (r)
        runner_finish(r, res);
    workload_destroy(w);
    runner_destroy(r);
    dev->ops = p->inner;
    dev->ops->destroy(dev);
    return rc;
}

static double train_seconds(const struct run_result *r)
{
    double s = 0;
    for (size_t i = 0; i < r->nphases; i++)
        if (phase_is_training(r->phases[i].name))
            s += r->phases[i].seconds;
    return s;
}

/* Every step timed, and (two steps) their training kernel times add up to the training phases'. */
static void check_step_times(const char *job, const char *dev, const struct run_result *r, const struct job_spec *spec)
{
    const int steps = spec->steps;
    double t = train_seconds(r);
    is_int((int)r->steps_timed, steps, "%s on %s: every step timed", job, dev);
    is_u64(r->samples, (uint64_t)(steps * spec->batch * spec->grad_accum), "%s on %s: %d steps of %d x %d samples",
           job, dev, steps, spec->batch, spec->grad_accum);
    ok(r->step_seconds_min > 0 && r->step_seconds_min <= r->step_seconds_median &&
           r->step_seconds_median <= r->step_seconds_max,
       "%s on %s: step times %.4f <= %.4f <= %.4f s", job, dev, r->step_seconds_min, r->step_seconds_median,
       r->step_seconds_max);
    ok(steps == 2 && fabs(r->step_seconds_min + r->step_seconds_max - t) <= 1e-9 * t,
       "%s on %s: the two steps' times add up to the training phases' %.4f s (load, eval, decode apart)", job, dev,
       t);
    if (r->measured) {
        ok(r->step_wall_seconds_min >= r->step_seconds_min && r->step_wall_seconds_max >= r->step_seconds_max,
           "%s on %s: a step's wall clock (%.4f-%.4f s) holds its kernels", job, dev, r->step_wall_seconds_min,
           r->step_wall_seconds_max);
        ok(r->wall_seconds >= r->kernel_seconds && r->kernel_seconds >= t,
           "%s on %s: the run's wall clock %.4f s >= its kernels' %.4f s >= the training phases'", job, dev,
           r->wall_seconds, r->kernel_seconds);
    } else {
        ok(r->step_wall_seconds_max == 0 && r->wall_seconds == 0, "%s on %s: a modelled run has no wall clock", job,
           dev);
    }
}

static void compare(const char *job, const struct run_result *h, const struct probe *hp, const struct run_result *s,
                    const struct probe *sp)
{
    struct stat_entry hk[ALLOC_STATS_NKEYS], sk[ALLOC_STATS_NKEYS];
    size_t n = alloc_stats_flatten(&h->stats, hk), m = alloc_stats_flatten(&s->stats, sk);
    size_t differ = 0;
    for (size_t i = 0; i < n && i < m; i++)
        if (strcmp(hk[i].key, sk[i].key) || hk[i].value != sk[i].value) {
            if (!differ++)
                diag("first difference: host %s = %lld, sim %s = %lld", hk[i].key, (long long)hk[i].value, sk[i].key,
                     (long long)sk[i].value);
        }
    ok(n == m && differ == 0, "%s: all %zu memory_stats keys equal on host and sim", job, n);
    is_u64(h->peak_allocated, s->peak_allocated, "%s: peak allocated equal", job);
    is_u64(h->peak_reserved, s->peak_reserved, "%s: peak reserved equal", job);
    is_u64(h->unallocated_at_peak, s->unallocated_at_peak, "%s: reserved-but-unallocated at the peak equal", job);
    ok(!memcmp(h->category_at_peak, s->category_at_peak, sizeof h->category_at_peak),
       "%s: live bytes per category at the peak equal", job);
    int phases_equal = h->nphases == s->nphases;
    for (size_t i = 0; phases_equal && i < h->nphases; i++)
        phases_equal = !strcmp(h->phases[i].name, s->phases[i].name) &&
                       h->phases[i].peak_allocated == s->phases[i].peak_allocated &&
                       h->phases[i].peak_reserved == s->phases[i].peak_reserved;
    ok(phases_equal, "%s: the same %zu phases with equal peaks", job, h->nphases);
    ok(h->allocs == s->allocs && h->frees == s->frees && h->kernels == s->kernels,
       "%s: %llu allocs, %llu frees, %llu kernels on both", job, (unsigned long long)h->allocs,
       (unsigned long long)h->frees, (unsigned long long)h->kernels);
    ok(hp->nevents == sp->nevents && hp->nevents < MAX_EVENTS &&
           !memcmp(hp->events, sp->events, hp->nevents * sizeof hp->events[0]),
       "%s: the same %zu device segment events (offsets from the first segment, sizes)", job, hp->nevents);
}

static void run_job(const char *job, const struct job_spec *spec, size_t want_losses)
{
    static struct probe hp, sp;
    struct run_result h, s;
    struct err e = {0};
    struct device *host = host_device_create(CAPACITY, &e);
    if (!ok(host != NULL, "%s: host device created", job)) {
        diag("%s", e.msg);
        return;
    }
    int rc = run_on(host, spec, &hp, &h);
    ok(rc == 0 && !h.oom.happened, "%s: runs on the host without an error or OOM", job);
    ok(h.measured && h.kernels > 0, "%s: %llu kernels run for real", job, (unsigned long long)h.kernels);
    int finite = hp.nlosses == want_losses;
    for (size_t i = 0; i < hp.nlosses; i++) {
        diag("%s: loss %zu = %.6f", job, i + 1, hp.losses[i]);
        finite = finite && isfinite(hp.losses[i]) && hp.losses[i] > 0;
    }
    ok(finite, "%s: %zu finite positive losses (want %zu)", job, hp.nlosses, want_losses);
    ok(hp.nlosses >= 2 && hp.losses[0] != hp.losses[1], "%s: the loss changes across steps", job);
    double t = train_seconds(&h);
    diag("%s: host %.3f s wall, %.3f s in kernels, %.3f s in training phases: %.2f steps/s, %.2f samples/s, "
         "%.2f GFLOP/s",
         job, h.wall_seconds, h.kernel_seconds, t, spec->steps / t, spec->steps * spec->batch / t,
         h.flops / h.kernel_seconds / 1e9);
    struct device *sim = sim_device_create("sim", CAPACITY, 0, NULL);
    rc = run_on(sim, spec, &sp, &s);
    ok(rc == 0 && !s.oom.happened && !s.measured, "%s: runs on sim, modelled", job);
    ok(s.kernel_seconds > 0, "%s: the sim models %.6f s of kernels", job, s.kernel_seconds);
    compare(job, &h, &hp, &s, &sp);
    check_step_times(job, "host", &h, spec);
    check_step_times(job, "sim", &s, spec);
}

static void transformer_job(void)
{
    struct job_spec s;
    job_spec_init(&s); /* tiny-transformer: GPT-2 style, dropout 0.1, AdamW */
    s.batch = 2;
    s.seq_len = 32;
    s.steps = 2;
    run_job("tiny-transformer", &s, 2);
}

static void unet_job(void)
{
    struct job_spec s;
    job_spec_init(&s);
    snprintf(s.model.preset, sizeof s.model.preset, "tiny-unet");
    s.batch = 2;
    s.image_size = 16; /* 8x8 latents */
    s.context_len = 8;
    s.steps = 2;
    s.ema = EMA_GPU;
    s.eval.every = 2;
    s.eval.sampling_steps = 2;
    s.eval.vae_decode = true;
    s.nextras = 1;
    s.extras[0] = (struct extra_spec){"tiny-vae", EXTRA_VAE, DT_F32, true};
    run_job("tiny-unet + tiny-vae", &s, 2);
}

int main(void)
{
    ok(phase_is_training("forward") && phase_is_training("backward") && phase_is_training("optimizer") &&
           phase_is_training("ema"),
       "forward, backward, optimizer and the EMA update are a step's training phases");
    ok(!phase_is_training("load") && !phase_is_training("eval") && !phase_is_training("decode") &&
           !phase_is_training("debug"),
       "load, eval, decode and a debugger's forwards are not");
    ok(phase_is_eval("eval") && phase_is_eval("decode") && !phase_is_eval("forward") && !phase_is_eval("debug"),
       "eval and decode are an eval's phases, forward and debug are not");
    transformer_job();
    unet_job();
    return done_testing();
}
