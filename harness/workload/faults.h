/* faults.h: the faults (their rows are in faults.c): ids, the parameter struct of each fault that takes
 * parameters, with its accessors, and the table. The generator code behind each fault is in
 * generate.c, found by its id. C++-includable. */
#ifndef OOMLAB_WORKLOAD_FAULTS_H
#define OOMLAB_WORKLOAD_FAULTS_H

#include <stdint.h>

#include "workload/switches.h"

#ifdef __cplusplus
extern "C" {
#endif

enum fault_id {
    FAULT_DUPLICATE_DTYPE_CONVERSION,
    FAULT_EMA_CONTEXT_SPIKE,
    FAULT_UNRELEASED_GRADIENTS,
    FAULT_VAE_DECODE_BURST,
    FAULT_ACTIVATION_GROWTH,
    FAULT_DEBUG_ACTIVATION_CAPTURE,
    FAULT_EVAL_SAMPLES_ON_DEVICE,
    FAULT_RESIDENT_TEXT_ENCODER,
    FAULT_VARIABLE_LENGTH_FRAGMENTATION,
    FAULT_COUNT
};

struct activation_growth_params {
    int batch_every;  /* the batch grows by one every N steps (0 = never) */
    int seq_step;     /* the sequence grows by this many tokens per step */
    int max_length;   /* every batch padded to this (0 = the model's max_positions, else the batch's length) */
};
SWITCH_PARAMS_ACCESSORS(activation_growth);

struct debug_activation_capture_params {
    int batches;      /* analysis forwards the hook keeps (0 = every one) */
};
SWITCH_PARAMS_ACCESSORS(debug_activation_capture);

struct variable_length_fragmentation_params {
    uint64_t seed;    /* of the length sequence */
    int min;          /* shortest sequence (0 = seq_len / 4) */
};
SWITCH_PARAMS_ACCESSORS(variable_length_fragmentation);

const struct switch_info *fault_table(int *count); /* indexed by enum fault_id */
const struct switch_info *fault_find(const char *name); /* NULL if unknown */
int fault_enable(struct job_spec *spec, const char *name, struct err *e);

#ifdef __cplusplus
}
#endif

#endif
