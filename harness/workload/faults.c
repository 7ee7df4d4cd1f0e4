/* faults.c: the fault table. Each row is a named, composable mistake: its help, its parameters (key
 * rows: type, bounds, default, help) and what it changes in the job's settings; the generator code
 * behind it (generate.c) is found by its id. */
#include "workload/switch_rows.h"

#define FAULT_TABLE(NAME, keys) SWITCH_PARAMS_TABLE("faults." #NAME, "fault", NAME, keys)

/* ---- activation_growth ---- */
SWITCH_PARAMS_DEFINE(fault_params, FAULT_ACTIVATION_GROWTH, activation_growth)
SWITCH_PARAMS_DEFAULTS(activation_growth, 0)
#define P struct activation_growth_params
static const struct key growth_keys[] = {
    K_INT(P, "batch_every", batch_every, 0, BIG, "never", "The batch grows by one every N steps."),
    K_INT(P, "seq_step", seq_step, 0, BIG, NULL, "The sequence grows by this many tokens per step."),
    K_INT(P, "max_length", max_length, 0, BIG, "the model's max_positions, else the batch's length",
          "Every batch is padded to this length."),
};
#undef P
static const struct key_table growth_params = FAULT_TABLE(activation_growth, growth_keys);

/* ---- debug_activation_capture ---- */
SWITCH_PARAMS_DEFINE(fault_params, FAULT_DEBUG_ACTIVATION_CAPTURE, debug_activation_capture)
SWITCH_PARAMS_DEFAULTS(debug_activation_capture, 0)
#define P struct debug_activation_capture_params
static const struct key capture_keys[] = {
    K_INT(P, "batches", batches, 0, BIG, "every one", "Analysis forwards whose output the hook keeps."),
};
#undef P
static const struct key_table capture_params = FAULT_TABLE(debug_activation_capture, capture_keys);

/* ---- variable_length_fragmentation ---- */
SWITCH_PARAMS_DEFINE(fault_params, FAULT_VARIABLE_LENGTH_FRAGMENTATION, variable_length_fragmentation)
SWITCH_PARAMS_DEFAULTS(variable_length_fragmentation, .seed = 1)
#define P struct variable_length_fragmentation_params
static const struct key varlen_keys[] = {
    {.name = "seed", .type = KEY_UINT, FIELD(P, seed), .imin = 0, .imax = LLONG_MAX,
     .help = "Seed of the deterministic sequence of lengths."},
    K_INT(P, "min", min, 0, BIG, "seq_len / 4", "Shortest sequence."),
};
#undef P
static const struct key_table varlen_params = FAULT_TABLE(variable_length_fragmentation, varlen_keys);

/* ---- settings hooks ---- */

static void keep_gradients(struct job_spec *s)
{
    s->set_to_none = false;
}

static void decode_on_eval(struct job_spec *s)
{
    s->eval.vae_decode = true;
}

static void text_encoder_on_device(struct job_spec *s)
{
    job_spec_place_extras(s, EXTRA_TEXT_ENCODER, true);
}

static const struct switch_info faults[FAULT_COUNT] = {
    {.id = FAULT_DUPLICATE_DTYPE_CONVERSION, .name = "duplicate_dtype_conversion",
     .help = "weights loaded in load_dtype then .to(param_dtype) while a reference to the old copy lives on, plus "
             "a state dict moved to the device again and kept"},
    {.id = FAULT_EMA_CONTEXT_SPIKE, .name = "ema_context_spike",
     .help = "eval inside the EMA context: store() clones every trained parameter on the device, copy_to, restore"},
    {.id = FAULT_UNRELEASED_GRADIENTS, .name = "unreleased_gradients",
     .help = "zero_grad(set_to_none=False) keeps .grad alive through the next forward; every step's loss stays "
             "referenced",
     .settings = keep_gradients},
    {.id = FAULT_VAE_DECODE_BURST, .name = "vae_decode_burst",
     .help = "eval decodes the whole batch of latents with the VAE at once", .settings = decode_on_eval},
    {.id = FAULT_ACTIVATION_GROWTH, .name = "activation_growth",
     .help = "batch and sequence grow over steps and every batch is padded to max_length", .params = &growth_params},
    {.id = FAULT_DEBUG_ACTIVATION_CAPTURE, .name = "debug_activation_capture",
     .help = "a debugging hook keeps each analysis forward's output, with its graph, outside no_grad",
     .params = &capture_params},
    {.id = FAULT_EVAL_SAMPLES_ON_DEVICE, .name = "eval_samples_on_device",
     .help = "generated samples (diffusion) or each eval batch's logits (Trainer without "
             "eval_accumulation_steps) are kept on the device"},
    {.id = FAULT_RESIDENT_TEXT_ENCODER, .name = "resident_text_encoder",
     .help = "the frozen text encoder stays on the device for the whole run", .settings = text_encoder_on_device},
    {.id = FAULT_VARIABLE_LENGTH_FRAGMENTATION, .name = "variable_length_fragmentation",
     .help = "sequence lengths change batch to batch (seeded), leaving cached blocks of the wrong sizes",
     .params = &varlen_params},
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
    return switch_enable(faults, FAULT_COUNT, "fault", &spec->faults, name, e);
}
