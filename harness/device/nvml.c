/* nvml.c: NVML loaded with dlopen on first use (see nvml.h). The ABI used here (return codes, enum
 * values, nvmlMemory_t and nvmlProcessInfo_v2_t layouts, the _v2/_v3 entry points) is NVML's stable C
 * API as documented in NVIDIA's NVML API reference (nvml.h of the driver's development files). */
#include "device/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_TEMPERATURE_GPU 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define NVML_ECC_CORRECTED 0
#define NVML_ECC_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_MAX_PROCS 256

typedef int nvml_ret;
typedef void *nvml_device;
struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml_process {
    unsigned pid;
    unsigned long long used;
    unsigned gpu_instance, compute_instance;
};

/* The entry points, resolved once. The optional ones (processes, MIG, telemetry) may be missing in
 * an old driver; a missing one reads as "unknown". */
static struct {
    int tried, ok;
    char why[320];
    nvml_ret (*init)(void);
    const char *(*error_string)(nvml_ret);
    nvml_ret (*count)(unsigned *);
    nvml_ret (*handle)(unsigned, nvml_device *);
    nvml_ret (*name)(nvml_device, char *, unsigned);
    nvml_ret (*uuid)(nvml_device, char *, unsigned);
    nvml_ret (*memory)(nvml_device, struct nvml_memory *);
    nvml_ret (*processes)(nvml_device, unsigned *, struct nvml_process *);
    nvml_ret (*mig)(nvml_device, unsigned *, unsigned *);
    nvml_ret (*compute_mode)(nvml_device, int *);
    nvml_ret (*temperature)(nvml_device, int, unsigned *);
    nvml_ret (*power)(nvml_device, unsigned *);
    nvml_ret (*clock)(nvml_device, int, unsigned *);
    nvml_ret (*reasons)(nvml_device, unsigned long long *);
    nvml_ret (*ecc)(nvml_device, int, int, unsigned long long *);
} lib;

static int load(struct err *e)
{
    if (lib.tried)
        return lib.ok ? 0 : err_set(e, ERR_INPUT, "%s", lib.why);
    lib.tried = 1;
    const char *path = getenv("OOMLAB_NVML");
    if (!path || !*path)
        path = "libnvidia-ml.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *msg = dlerror();
        snprintf(lib.why, sizeof lib.why, "NVML unavailable: %s (no NVIDIA driver here)", msg ? msg : path);
        return err_set(e, ERR_INPUT, "%s", lib.why);
    }
    *(void **)&lib.init = dlsym(h, "nvmlInit_v2");
    *(void **)&lib.error_string = dlsym(h, "nvmlErrorString");
    *(void **)&lib.count = dlsym(h, "nvmlDeviceGetCount_v2");
    *(void **)&lib.handle = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&lib.name = dlsym(h, "nvmlDeviceGetName");
    *(void **)&lib.uuid = dlsym(h, "nvmlDeviceGetUUID");
    *(void **)&lib.memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
    *(void **)&lib.processes = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    *(void **)&lib.mig = dlsym(h, "nvmlDeviceGetMigMode");
    *(void **)&lib.compute_mode = dlsym(h, "nvmlDeviceGetComputeMode");
    *(void **)&lib.temperature = dlsym(h, "nvmlDeviceGetTemperature");
    *(void **)&lib.power = dlsym(h, "nvmlDeviceGetPowerUsage");
    *(void **)&lib.clock = dlsym(h, "nvmlDeviceGetClockInfo");
    /* renamed in CUDA 12.2's NVML; the old name stays exported by older drivers only */
    if (!(*(void **)&lib.reasons = dlsym(h, "nvmlDeviceGetCurrentClocksEventReasons")))
        *(void **)&lib.reasons = dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons");
    *(void **)&lib.ecc = dlsym(h, "nvmlDeviceGetTotalEccErrors");
    const char *missing = !lib.init ? "nvmlInit_v2" : !lib.error_string ? "nvmlErrorString"
                        : !lib.count ? "nvmlDeviceGetCount_v2" : !lib.handle ? "nvmlDeviceGetHandleByIndex_v2"
                        : !lib.name ? "nvmlDeviceGetName" : !lib.uuid ? "nvmlDeviceGetUUID"
                        : !lib.memory ? "nvmlDeviceGetMemoryInfo" : NULL;
    if (missing) {
        snprintf(lib.why, sizeof lib.why, "NVML unavailable: %s has no %s", path, missing);
        return err_set(e, ERR_INPUT, "%s", lib.why);
    }
    nvml_ret rc = lib.init();
    if (rc != NVML_SUCCESS) {
        snprintf(lib.why, sizeof lib.why, "NVML unavailable: nvmlInit: %s", lib.error_string(rc));
        return err_set(e, ERR_INPUT, "%s", lib.why);
    }
    lib.ok = 1;
    return 0;
}

/* What an optional call read into `value`, or NVML_UNKNOWN when the call is missing or fails (the
 * conditional sequences the call before the read). */
#define READ(value, call, ...) (call && call(__VA_ARGS__) == NVML_SUCCESS ? (long long)(value) : NVML_UNKNOWN)

/* Compute processes other than this one: count and memory. */
static void read_others(nvml_device d, struct nvml_gpu *g)
{
    g->others = g->others_used = NVML_UNKNOWN;
    if (!lib.processes)
        return;
    struct nvml_process p[NVML_MAX_PROCS];
    unsigned n = NVML_MAX_PROCS;
    if (lib.processes(d, &n, p) != NVML_SUCCESS)
        return;
    g->others = g->others_used = 0;
    for (unsigned i = 0; i < n && i < NVML_MAX_PROCS; i++) {
        if (p[i].pid == (unsigned)getpid())
            continue;
        g->others++;
        g->others_used += (long long)p[i].used;
    }
}

static void read_telemetry(nvml_device d, struct nvml_gpu *g)
{
    unsigned temp = 0, power = 0, sm = 0, mem = 0, mig = 0, pending = 0;
    int mode = 0;
    unsigned long long reasons = 0, corrected = 0, uncorrected = 0;
    g->mig = READ(mig, lib.mig, d, &mig, &pending);
    g->compute_mode = READ(mode, lib.compute_mode, d, &mode);
    g->temperature_c = READ(temp, lib.temperature, d, NVML_TEMPERATURE_GPU, &temp);
    g->power_mw = READ(power, lib.power, d, &power);
    g->sm_mhz = READ(sm, lib.clock, d, NVML_CLOCK_SM, &sm);
    g->mem_mhz = READ(mem, lib.clock, d, NVML_CLOCK_MEM, &mem);
    g->clock_event_reasons = READ(reasons, lib.reasons, d, &reasons);
    g->ecc_corrected = READ(corrected, lib.ecc, d, NVML_ECC_CORRECTED, NVML_VOLATILE_ECC, &corrected);
    g->ecc_uncorrected = READ(uncorrected, lib.ecc, d, NVML_ECC_UNCORRECTED, NVML_VOLATILE_ECC, &uncorrected);
}

int nvml_list(struct nvml_gpu *gpus, int max, int *count, struct err *e)
{
    *count = 0;
    if (load(e))
        return -1;
    unsigned n = 0;
    nvml_ret rc = lib.count(&n);
    if (rc != NVML_SUCCESS)
        return err_set(e, ERR_INPUT, "NVML: nvmlDeviceGetCount: %s", lib.error_string(rc));
    for (unsigned i = 0; i < n && (int)i < max; i++) {
        struct nvml_gpu *g = &gpus[i];
        *g = (struct nvml_gpu){.index = i};
        nvml_device d;
        struct nvml_memory m;
        if ((rc = lib.handle(i, &d)) != NVML_SUCCESS || (rc = lib.name(d, g->name, sizeof g->name)) != NVML_SUCCESS ||
            (rc = lib.uuid(d, g->uuid, sizeof g->uuid)) != NVML_SUCCESS || (rc = lib.memory(d, &m)) != NVML_SUCCESS)
            return err_set(e, ERR_INPUT, "NVML: GPU %u: %s", i, lib.error_string(rc));
        g->name[sizeof g->name - 1] = g->uuid[sizeof g->uuid - 1] = '\0';
        g->total = m.total;
        g->free = m.free;
        g->used = m.used;
        read_others(d, g);
        read_telemetry(d, g);
        (*count)++;
    }
    return 0;
}

const char *nvml_reading_format(long long v, const char *fmt, char *buf, size_t n)
{
    if (v == NVML_UNKNOWN)
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, fmt, v);
    return buf;
}

void nvml_reasons_format(long long reasons, char *buf, size_t n)
{
    /* nvmlClocksEventReason* bits, in NVML's order */
    static const char *const names[] = {"gpu idle", "applications clocks setting", "sw power cap",
                                        "hw slowdown", "sync boost", "sw thermal slowdown",
                                        "hw thermal slowdown", "hw power brake slowdown", "display clock setting"};
    if (reasons == NVML_UNKNOWN) {
        snprintf(buf, n, "unknown");
        return;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned b = 0; b < sizeof names / sizeof names[0]; b++)
        if (reasons & (1LL << b) && used < n)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", names[b]);
    if (!used)
        snprintf(buf, n, "none");
}
