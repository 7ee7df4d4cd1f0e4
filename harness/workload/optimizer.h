/* optimizer.h: optimizer step and zero_grad for the generator (internal). */
#ifndef OOMLAB_WORKLOAD_OPTIMIZER_H
#define OOMLAB_WORKLOAD_OPTIMIZER_H

#include <stdlib.h>

#include "workload/gen.h"

void optimizer_step(struct gen *g);
void optimizer_zero_grad(struct gen *g, bool set_to_none);

#endif
