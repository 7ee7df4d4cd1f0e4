/* compiled_act.h: the fix compiled_activations (compiled_act.c), internal to the workload generator. */
#ifndef OOMLAB_WORKLOAD_COMPILED_ACT_H
#define OOMLAB_WORKLOAD_COMPILED_ACT_H

#include "workload/gen.h"

/* Whether a gate of this activation is fused (SiLU, GELU, tanh GELU). */
bool compiled_gate_fuses(enum act_kind act);
/* act(gate) * up as one kernel saving gate and up (a new tensor of gate's shape and dtype). */
tref nn_gated_compiled(struct gen *g, const char *name, tref gate, tref up, enum act_kind act);

#endif
