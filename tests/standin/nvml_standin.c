/* nvml_standin.c: a stand-in for libnvidia-ml.so.1 that serves the NVML calls oomlab makes from a
 * text file, so the detector, `oomlab devices` and `--device cuda:auto` are tested on machines without
 * a GPU (loaded through $OOMLAB_NVML). The file named by $OOMLAB_NVML_STANDIN has one GPU per line,
 * `key=value` fields separated by ';':
 *   name=NVIDIA GeForce RTX 5090;total=34190917632;used=1073741824;procs=4242:536870912,77:1048576;
 *   mig=0;mode=0;temp=45;power=120000;sm=2400;mem=14001;reasons=4;ecc=0:3
 * (`#` starts a comment line). It is read again by every call, so a test can free a GPU while oomlab
 * waits for one. A field left out is one the GPU does not support (NVML_ERROR_NOT_SUPPORTED); no file
 * is a driver that is not loaded (nvmlInit fails); `init=N` alone on a line makes nvmlInit return N. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OK 0
#define E_INVALID 2
#define E_NOT_SUPPORTED 3
#define E_NOT_FOUND 6
#define E_INSUFFICIENT_SIZE 7
#define E_DRIVER_NOT_LOADED 9
#define MAX_GPUS 16
#define LINE 1024

struct memory {
    unsigned long long total, free, used;
};
struct process {
    unsigned pid;
    unsigned long long used;
    unsigned gpu_instance, compute_instance;
};

/* One GPU's line, and the value of `key` in it. */
static int gpu_line(unsigned index, char *line, size_t n)
{
    const char *path = getenv("OOMLAB_NVML_STANDIN");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return -1;
    unsigned i = 0;
    int found = -1;
    while (fgets(line, (int)n, f)) {
        if (line[0] == '#' || line[0] == '\n' || !strncmp(line, "init=", 5))
            continue;
        if (i++ == index) {
            line[strcspn(line, "\n")] = '\0';
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

static const char *field(const char *line, const char *key, char *val, size_t n)
{
    size_t k = strlen(key);
    for (const char *p = line; p && *p; p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL) {
        if (!strncmp(p, key, k) && p[k] == '=') {
            size_t len = strcspn(p + k + 1, ";");
            snprintf(val, n, "%.*s", (int)(len < n ? len : n - 1), p + k + 1);
            return val;
        }
    }
    return NULL;
}

static int number(unsigned index, const char *key, unsigned long long *out)
{
    char line[LINE], val[64];
    if (gpu_line(index, line, sizeof line))
        return E_INVALID;
    if (!field(line, key, val, sizeof val))
        return E_NOT_SUPPORTED;
    *out = strtoull(val, NULL, 0);
    return OK;
}

/* A device handle is its index plus one, so that no handle is NULL. */
static unsigned idx(void *device)
{
    return (unsigned)((unsigned long)device - 1);
}

int nvmlInit_v2(void)
{
    const char *path = getenv("OOMLAB_NVML_STANDIN");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return E_DRIVER_NOT_LOADED;
    char line[LINE];
    int rc = OK;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "init=", 5))
            rc = atoi(line + 5);
    fclose(f);
    return rc;
}

int nvmlShutdown(void)
{
    return OK;
}

const char *nvmlErrorString(int rc)
{
    switch (rc) {
    case OK: return "Success";
    case E_INVALID: return "Invalid Argument";
    case E_NOT_SUPPORTED: return "Not Supported";
    case E_NOT_FOUND: return "Not Found";
    case E_INSUFFICIENT_SIZE: return "Insufficient Size";
    case E_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

int nvmlDeviceGetCount_v2(unsigned *count)
{
    char line[LINE];
    unsigned n = 0;
    while (n < MAX_GPUS && gpu_line(n, line, sizeof line) == 0)
        n++;
    *count = n;
    return OK;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **device)
{
    char line[LINE];
    if (gpu_line(index, line, sizeof line))
        return E_INVALID;
    *device = (void *)(unsigned long)(index + 1);
    return OK;
}

static int text(void *device, const char *key, char *out, unsigned n)
{
    char line[LINE], val[256];
    if (gpu_line(idx(device), line, sizeof line))
        return E_INVALID;
    if (!field(line, key, val, sizeof val))
        snprintf(val, sizeof val, "GPU-standin-%u", idx(device));
    if (strlen(val) >= n)
        return E_INSUFFICIENT_SIZE;
    snprintf(out, n, "%s", val);
    return OK;
}

int nvmlDeviceGetName(void *device, char *name, unsigned n)
{
    return text(device, "name", name, n);
}

int nvmlDeviceGetUUID(void *device, char *uuid, unsigned n)
{
    return text(device, "uuid", uuid, n);
}

int nvmlDeviceGetMemoryInfo(void *device, struct memory *m)
{
    unsigned long long total = 0, used = 0;
    int rc = number(idx(device), "total", &total);
    if (rc == OK && (rc = number(idx(device), "used", &used)) == E_NOT_SUPPORTED)
        rc = OK, used = 0;
    if (rc != OK)
        return rc;
    *m = (struct memory){total, used < total ? total - used : 0, used};
    return OK;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned *count, struct process *infos)
{
    char line[LINE], val[512];
    if (gpu_line(idx(device), line, sizeof line))
        return E_INVALID;
    if (!field(line, "procs", val, sizeof val))
        return E_NOT_SUPPORTED;
    unsigned n = 0;
    for (char *p = val; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] ? 1 : 0)) {
        if (n < *count)
            infos[n] = (struct process){.pid = (unsigned)strtoul(p, NULL, 10),
                                        .used = strtoull(strchr(p, ':') ? strchr(p, ':') + 1 : "0", NULL, 10)};
        n++;
    }
    int rc = n > *count ? E_INSUFFICIENT_SIZE : OK;
    *count = n;
    return rc;
}

static int small(void *device, const char *key, unsigned *out)
{
    unsigned long long v = 0;
    int rc = number(idx(device), key, &v);
    *out = (unsigned)v;
    return rc;
}

int nvmlDeviceGetMigMode(void *device, unsigned *current, unsigned *pending)
{
    int rc = small(device, "mig", current);
    *pending = *current;
    return rc;
}

int nvmlDeviceGetComputeMode(void *device, int *mode)
{
    return small(device, "mode", (unsigned *)mode);
}

int nvmlDeviceGetTemperature(void *device, int sensor, unsigned *celsius)
{
    return sensor == 0 ? small(device, "temp", celsius) : E_INVALID;
}

int nvmlDeviceGetPowerUsage(void *device, unsigned *milliwatts)
{
    return small(device, "power", milliwatts);
}

int nvmlDeviceGetClockInfo(void *device, int type, unsigned *mhz)
{
    return type == 1 ? small(device, "sm", mhz) : type == 2 ? small(device, "mem", mhz) : E_INVALID;
}

int nvmlDeviceGetCurrentClocksEventReasons(void *device, unsigned long long *reasons)
{
    return number(idx(device), "reasons", reasons);
}

/* ecc=CORRECTED:UNCORRECTED */
int nvmlDeviceGetTotalEccErrors(void *device, int error_type, int counter_type, unsigned long long *count)
{
    char line[LINE], val[64];
    if (gpu_line(idx(device), line, sizeof line))
        return E_INVALID;
    if (!field(line, "ecc", val, sizeof val))
        return E_NOT_SUPPORTED;
    const char *colon = strchr(val, ':');
    *count = strtoull(error_type == 0 || !colon ? val : colon + 1, NULL, 10);
    return counter_type == 0 ? OK : E_INVALID;
}
