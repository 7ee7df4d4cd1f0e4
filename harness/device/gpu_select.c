/* gpu_select.c: cuda:auto (see gpu_select.h). */
#include "device/gpu_select.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/size.h"

static struct gpu_select_options options;
static int chosen = -1; /* the CUDA ordinal picked in this process, once picked */

void gpu_select_configure(const struct gpu_select_options *o)
{
    options = *o;
    chosen = -1;
}

static void append(char *buf, size_t n, const char *fmt, const char *a, const char *b)
{
    size_t used = strlen(buf);
    if (used < n)
        snprintf(buf + used, n - used, fmt, a, b);
}

int gpu_pick(const struct nvml_gpu *g, int n, const bool *visible, uint64_t min_free, char *why, size_t whyn)
{
    int best = -1;
    why[0] = '\0';
    for (int i = 0; i < n; i++) {
        char gpu[160], reason[96];
        snprintf(gpu, sizeof gpu, "GPU %u (%s)", g[i].index, g[i].name);
        reason[0] = '\0';
        if (!visible[i])
            snprintf(reason, sizeof reason, "hidden by CUDA_VISIBLE_DEVICES");
        else if (g[i].mig == 1)
            snprintf(reason, sizeof reason, "MIG enabled: name a MIG device in CUDA_VISIBLE_DEVICES");
        else if (g[i].compute_mode == NVML_MODE_PROHIBITED)
            snprintf(reason, sizeof reason, "compute mode prohibited");
        else if (g[i].compute_mode == NVML_MODE_EXCLUSIVE_PROCESS && g[i].others > 0)
            snprintf(reason, sizeof reason, "exclusive-process mode, held by another process");
        else if (g[i].free < min_free || !g[i].free) {
            char f[32], m[32];
            size_format_pytorch(g[i].free, f, sizeof f);
            size_format_pytorch(min_free, m, sizeof m);
            snprintf(reason, sizeof reason, "%s free, below the %s asked for", f, m);
        }
        if (reason[0]) {
            append(why, whyn, "%s: %s\n", gpu, reason);
            continue;
        }
        if (best < 0 || g[i].free > g[best].free)
            best = i;
    }
    if (!n)
        snprintf(why, whyn, "NVML sees no GPU\n");
    return best;
}

int gpu_visible(const struct nvml_gpu *g, int n, const char *cvd, int *ordinal, struct err *e)
{
    for (int i = 0; i < n; i++)
        ordinal[i] = cvd ? -1 : i;
    if (!cvd)
        return 0;
    int next = 0;
    for (const char *p = cvd; *p;) {
        size_t len = strcspn(p, ",");
        char tok[128];
        snprintf(tok, sizeof tok, "%.*s", (int)(len < sizeof tok ? len : sizeof tok - 1), p);
        if (!strncmp(tok, "MIG-", 4))
            return err_set(e, ERR_INPUT,
                           "cuda:auto cannot choose among MIG devices (CUDA_VISIBLE_DEVICES=%s): name cuda:N", cvd);
        int match = -1;
        char *end;
        long idx = strtol(tok, &end, 10);
        if (tok[0] >= '0' && tok[0] <= '9' && !*end) {
            for (int i = 0; i < n; i++)
                if ((long)g[i].index == idx)
                    match = i;
        } else if (tok[0]) {
            for (int i = 0; i < n; i++)
                if (!strncmp(g[i].uuid, tok, strlen(tok)))
                    match = match == -1 ? i : -2; /* a prefix must name one GPU */
        }
        if (match < 0 || ordinal[match] >= 0)
            break; /* CUDA ignores this entry and every one after it */
        ordinal[match] = next++;
        p += len + (p[len] == ',');
    }
    return 0;
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_seconds(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0)
        ;
}

int gpu_select_auto(int *ordinal, FILE *progress, struct err *e)
{
    if (chosen >= 0) {
        *ordinal = chosen;
        return 0;
    }
    const char *order = getenv("CUDA_DEVICE_ORDER");
    if (!order)
        setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
    else if (strcmp(order, "PCI_BUS_ID"))
        return err_set(e, ERR_INPUT,
                       "cuda:auto: CUDA_DEVICE_ORDER=%s numbers GPUs differently from NVML; unset it or set PCI_BUS_ID",
                       order);
    double poll = options.poll_seconds > 0 ? options.poll_seconds : GPU_POLL_DEFAULT_SECONDS;
    double start = now_seconds();
    static struct nvml_gpu g[NVML_MAX_GPUS];
    for (int polls = 0;; polls++) {
        int n, ord[NVML_MAX_GPUS];
        bool visible[NVML_MAX_GPUS];
        char why[2048];
        if (nvml_list(g, NVML_MAX_GPUS, &n, e) || gpu_visible(g, n, getenv("CUDA_VISIBLE_DEVICES"), ord, e)) {
            err_prefix(e, "cuda:auto: ");
            return -1;
        }
        for (int i = 0; i < n; i++)
            visible[i] = ord[i] >= 0;
        int pick = gpu_pick(g, n, visible, options.min_free, why, sizeof why);
        if (pick >= 0) {
            *ordinal = chosen = ord[pick];
            return 0;
        }
        double waited = now_seconds() - start;
        why[strlen(why) - 1] = '\0'; /* every reason ends in a newline */
        if (waited + poll > options.wait_seconds) {
            if (options.wait_seconds > 0)
                return err_set(e, ERR_INPUT, "cuda:auto: no usable GPU after waiting %.0f s (%d polls):\n%s",
                               waited, polls + 1, why);
            return err_set(e, ERR_INPUT, "cuda:auto: no usable GPU (--wait-for-gpu waits for one):\n%s", why);
        }
        if (progress) {
            fprintf(progress, "oomlab: waiting for a GPU (%.0f s of %.0f s): ", waited, options.wait_seconds);
            for (const char *line = why; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != 0))
                fprintf(progress, "%s%.*s", line == why ? "" : "; ", (int)strcspn(line, "\n"), line);
            fputc('\n', progress);
        }
        sleep_seconds(poll);
    }
}
