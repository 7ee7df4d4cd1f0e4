/* cmd_list.c: `oomlab list [presets|faults|fixes|kernels|profiles|scenarios [DIR]]`: what oomlab knows. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "device/profiles.h"
#include "kernels.h"
#include "scenario/keytable.h"
#include "scenario/scenario.h"
#include "util/size.h"
#include "workload/spec.h"

/* Each switch with its help, its parameters (type, bounds and default from its row's key table) and,
 * for an allocator fix, the setting it adds with its default parameters. */
static void list_switches(const char *what, const struct switch_info *t, int n)
{
    printf("%s:\n", what);
    for (int i = 0; i < n; i++) {
        printf("  %-32s %s\n", t[i].name, t[i].help);
        const struct key_table *params = t[i].params;
        void *defaults = params ? calloc(1, params->obj_size) : NULL;
        if (defaults && params->init)
            params->init(defaults);
        for (size_t p = 0; defaults && p < params->nkeys; p++) {
            char type[256], def[128];
            keytable_type_text(&params->keys[p], type, sizeof type);
            keytable_default_text(&params->keys[p], defaults, def, sizeof def);
            printf("  %-32s   %s (%s, default %s): %s\n", "", params->keys[p].name, type, def, params->keys[p].help);
        }
        free(defaults);
        char setting[128];
        switch_alloc_setting(&t[i], setting, sizeof setting);
        if (*setting)
            printf("  %-32s   sets PYTORCH_CUDA_ALLOC_CONF %s%s\n", "", setting, params ? " (by default)" : "");
    }
}

static void list_profiles(void)
{
    printf("GPU profiles for the simulated device (--device sim:NAME, or sim:NAME@cudaX.Y for that CUDA version's "
           "stack):\n");
    for (size_t i = 0; i < gpu_profile_count(); i++) {
        const struct gpu_profile *p = gpu_profile_at(i);
        const struct arch_calibration *cal = p->calibration;
        char total[32], context[32];
        size_format_pytorch(p->total_bytes, total, sizeof total);
        size_format_pytorch(p->context_bytes, context, sizeof context);
        printf("  %-12s %10s total, %s context, %4.0f GB/s, %6.1f TFLOP/s 16-bit, %5.1f fp32, %d SMs, cuBLAS "
               "workspace %llu B\n"
               "               %s\n",
               p->name, total, context, p->bandwidth_gbs, p->tflops_16bit, p->tflops_fp32, p->sms,
               (unsigned long long)p->cublas_workspace_bytes, p->description);
        if (p->matmul_tflops[DT_F32] > 0)
            printf("               matmul measured: %.2f fp32, %.2f bf16, %.2f fp16 TFLOP/s\n", p->matmul_tflops[DT_F32],
                   p->matmul_tflops[DT_BF16], p->matmul_tflops[DT_F16]);
        else
            printf("               matmul: %s's shares of the spec rates (no measurement published)\n", cal->name);
        printf("               kernel-time calibration: %s, on %s\n", cal->name, cal->source);
    }
    printf("software stacks (sim:NAME@cudaX.Y picks the row of CUDA X.Y; without it, the last):\n");
    for (size_t i = 0; i < software_stack_count(); i++) {
        const struct software_stack *st = software_stack_at(i);
        const struct software_stack *next = software_stack_at(i + 1);
        char context[32], versions[32];
        size_format_pytorch(st->context_bytes, context, sizeof context);
        if (i == 0 && next)
            snprintf(versions, sizeof versions, "before %d.%d", next->major, next->minor);
        else
            snprintf(versions, sizeof versions, "%d.%d on", st->major, st->minor);
        printf("  CUDA %-11s %s: %s CUDA context, %.0f us host time per op, 16-bit GEMMs on tensor cores %s\n"
               "               %s\n",
               versions, st->name, context, st->host_op_us,
               st->tensor_cores_any_shape ? "whatever their shape" : "only aligned to 8", st->source);
    }
}

static void list_kernels(void)
{
    printf("kernels (CPU implementations in kernels/cpu, CUDA twins in kernels/cuda):\n");
    for (unsigned i = 0; i < kernel_count(); i++) {
        const struct kernel_desc *d = kernel_get(i);
        printf("  %-22s %s\n", d->name, d->summary);
    }
}

static int list_scenarios(const char *dir)
{
    struct scenario *sc;
    size_t n;
    struct err e = {0};
    if (scenario_load_dir_or_file(dir, &sc, &n, &e)) {
        fprintf(stderr, "oomlab list: %s\n", e.msg);
        return 2;
    }
    printf("scenarios in %s:\n", dir);
    for (size_t i = 0; i < n; i++)
        printf("  %-40s %s (%zu variants)\n", sc[i].name, sc[i].title, sc[i].nvariants);
    scenario_free_all(sc, n);
    return 0;
}

void cmd_list_usage(FILE *f)
{
    fprintf(f, "usage: oomlab list [presets|faults|fixes|kernels|profiles|scenarios [DIR]]\n"
               "  model presets with their exact parameter counts, faults and fixes with their parameters,\n"
               "  kernels, GPU profiles, or the scenarios in DIR (default scenarios/); all but scenarios\n"
               "  without an argument\n");
}

const struct option cmd_list_options[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

int cmd_list(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    bool all = !strcmp(what, "all");
    int n;
    if (!strcmp(what, "--help") || !strcmp(what, "-h")) {
        cmd_list_usage(stdout);
        return 0;
    }
    if (all || !strcmp(what, "presets")) {
        printf("model presets (exact parameter counts):\n");
        presets_print(stdout);
    }
    if (all || !strcmp(what, "faults")) {
        const struct switch_info *t = fault_table(&n);
        list_switches("faults (what a scenario switches on)", t, n);
    }
    if (all || !strcmp(what, "fixes")) {
        const struct switch_info *t = fix_table(&n);
        list_switches("fixes (what an after variant adds)", t, n);
    }
    if (all || !strcmp(what, "kernels"))
        list_kernels();
    if (all || !strcmp(what, "profiles"))
        list_profiles();
    if (!strcmp(what, "scenarios"))
        return list_scenarios(argc > 2 ? argv[2] : "scenarios");
    if (!all && strcmp(what, "presets") && strcmp(what, "faults") && strcmp(what, "fixes") &&
        strcmp(what, "kernels") && strcmp(what, "profiles")) {
        fprintf(stderr, "oomlab list: unknown list '%s' (presets, faults, fixes, kernels, profiles, scenarios)\n", what);
        return 2;
    }
    return 0;
}
