/* profile_detect.c: see profile_detect.h. */
#include "device/profile_detect.h"

#include <ctype.h>
#include <string.h>

/* The model as NVML names it, per profile (NVML: "NVIDIA GeForce RTX 4090", "Tesla T4",
 * "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-16GB", "NVIDIA RTX PRO 6000 Blackwell ..."). */
static const struct {
    const char *profile, *model;
} models[] = {
    {"rtx5090", "RTX 5090"}, {"rtx4090", "RTX 4090"}, {"rtx4080", "RTX 4080"}, {"rtx5080", "RTX 5080"},
    {"rtx5070ti", "RTX 5070 Ti"}, {"rtx3090", "RTX 3090"}, {"rtx-a6000", "RTX A6000"},
    {"rtx-pro-6000", "RTX PRO 6000"}, {"a100-40", "A100"}, {"a100-80", "A100"}, {"h100", "H100"},
    {"h200", "H200"}, {"b200", "B200"}, {"l4", "L4"}, {"l40s", "L40S"}, {"a10g", "A10G"}, {"t4", "T4"},
    {"v100-16", "V100"}, {"v100-32", "V100"},
};

/* `model` in `name` as a word of its own ("L4" is not in "L40S"). */
static bool names_model(const char *name, const char *model)
{
    size_t len = strlen(model);
    for (const char *p = strstr(name, model); p; p = strstr(p + 1, model)) {
        bool start = p == name || !isalnum((unsigned char)p[-1]);
        bool end = !isalnum((unsigned char)p[len]);
        if (start && end)
            return true;
    }
    return false;
}

static uint64_t distance(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

const struct gpu_profile *gpu_profile_for(const struct nvml_gpu *g)
{
    const struct gpu_profile *best = NULL;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        const struct gpu_profile *p = gpu_profile_find(models[i].profile);
        if (p && names_model(g->name, models[i].model) &&
            (!best || distance(p->total_bytes, g->total) < distance(best->total_bytes, g->total)))
            best = p;
    }
    return best;
}

int gpu_profile_detect(unsigned index, const struct gpu_profile **out, struct err *e)
{
    static struct nvml_gpu g[NVML_MAX_GPUS];
    int n;
    if (nvml_list(g, NVML_MAX_GPUS, &n, e))
        return -1;
    if ((int)index >= n)
        return err_set(e, ERR_INPUT, "no GPU %u: NVML sees %d", index, n);
    if (!(*out = gpu_profile_for(&g[index])))
        return err_set(e, ERR_INPUT, "GPU %u (%s) matches no profile (oomlab list profiles); sim:SIZE with its total "
                                     "simulates it with the default architecture",
                       index, g[index].name);
    return 0;
}
