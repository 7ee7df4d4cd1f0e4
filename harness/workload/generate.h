/* generate.h: the workload generator's public interface: a job_spec in, its op program streamed
 * out one op at a time. Tag strings stay valid until workload_destroy(). C++-includable. */
#ifndef OOMLAB_WORKLOAD_GENERATE_H
#define OOMLAB_WORKLOAD_GENERATE_H

#include <stddef.h>

#include "program/program.h"
#include "workload/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

struct workload;

/* Validates a copy of the spec and enumerates the models' parameters. NULL (and e set) on error. */
struct workload *workload_create(const struct job_spec *spec, struct err *e);
/* Emits the whole program (load, steps, evals) to sink; -1 if the sink or the generator failed. */
int workload_run(struct workload *w, struct op_sink *sink, struct err *e);
/* Host bytes the generator holds (tensor slab, tape, parameters, strings). */
size_t workload_host_bytes(const struct workload *w);
void workload_destroy(struct workload *w);

/* create + run + destroy: for sinks that do not keep op names after returning. */
int workload_generate(const struct job_spec *spec, struct op_sink *sink, struct err *e);

#ifdef __cplusplus
}
#endif

#endif
