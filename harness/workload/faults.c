/* faults.c: the fault table: each a named, composable switch that changes what the generator emits
 * (the code behind each is in generate.c, named after the fault). */
#include <stddef.h>

#include "workload/switches.h"

#define FP(field) offsetof(struct fault_params, field)

static const struct switch_param growth_params[] = {
    {"batch_every", SWITCH_INT, FP(growth_batch_every), "0", "batch grows by one every N steps (0 = never)"},
    {"seq_step", SWITCH_INT, FP(growth_seq_step), "0", "sequence grows by this many tokens per step"},
    {"max_length", SWITCH_INT, FP(max_length), "0", "every batch padded to this length (0 = model max positions)"},
};
static const struct switch_param capture_params[] = {
    {"batches", SWITCH_INT, FP(capture_batches), "0", "analysis forwards the hook keeps (0 = every one)"},
};
static const struct switch_param varlen_params[] = {
    {"seed", SWITCH_U64, FP(varlen_seed), "1", "seed of the deterministic length sequence"},
    {"min", SWITCH_INT, FP(varlen_min), "0", "shortest sequence (0 = seq_len / 4)"},
};

#define N(a) (int)(sizeof a / sizeof a[0])

static const struct switch_info faults[FAULT_COUNT] = {
    {FAULT_DUPLICATE_DTYPE_CONVERSION, "duplicate_dtype_conversion",
     "weights loaded in load_dtype then .to(param_dtype) while a reference to the old copy lives on, plus a state dict moved to the device again and kept",
     NULL, 0, NULL},
    {FAULT_EMA_CONTEXT_SPIKE, "ema_context_spike",
     "eval inside the EMA context: store() clones every trained parameter on the device, copy_to, restore", NULL, 0,
     NULL},
    {FAULT_UNRELEASED_GRADIENTS, "unreleased_gradients",
     "zero_grad(set_to_none=False) keeps .grad alive through the next forward; every step's loss stays referenced",
     NULL, 0, NULL},
    {FAULT_VAE_DECODE_BURST, "vae_decode_burst", "eval decodes the whole batch of latents with the VAE at once", NULL,
     0, NULL},
    {FAULT_ACTIVATION_GROWTH, "activation_growth",
     "batch and sequence grow over steps and every batch is padded to max_length", growth_params, N(growth_params),
     NULL},
    {FAULT_DEBUG_ACTIVATION_CAPTURE, "debug_activation_capture",
     "a debugging hook keeps each analysis forward's output, with its graph, outside no_grad", capture_params,
     N(capture_params), NULL},
    {FAULT_EVAL_SAMPLES_ON_DEVICE, "eval_samples_on_device", "generated samples are kept in a list on the device",
     NULL, 0, NULL},
    {FAULT_RESIDENT_TEXT_ENCODER, "resident_text_encoder",
     "the frozen text encoder stays on the device for the whole run", NULL, 0, NULL},
    {FAULT_VARIABLE_LENGTH_FRAGMENTATION, "variable_length_fragmentation",
     "sequence lengths change batch to batch (seeded), leaving cached blocks of the wrong sizes", varlen_params,
     N(varlen_params), NULL},
};

const struct switch_info *fault_table(int *count)
{
    *count = FAULT_COUNT;
    return faults;
}

const struct switch_info *fault_find(const char *name)
{
    return switch_find(faults, FAULT_COUNT, name);
}

int fault_enable(struct job_spec *spec, const char *name, struct err *e)
{
    const struct switch_info *f = fault_find(name);
    if (!f)
        return err_set(e, ERR_INPUT, "unknown fault '%s' (see `oomlab list`)", name);
    spec->faults |= 1u << f->id;
    return 0;
}

int fault_param_set(struct job_spec *spec, const char *fault, const char *param, const char *value, struct err *e)
{
    const struct switch_info *f = fault_find(fault);
    if (!f)
        return err_set(e, ERR_INPUT, "unknown fault '%s' (see `oomlab list`)", fault);
    return switch_param_set(f, &spec->fault, param, value, e);
}
