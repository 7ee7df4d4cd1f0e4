/* sim_runner.h: for runner tests, a runner under a generated program's rules (runner options NULL) on a sim
 * of the given capacity ("64MiB"), and a list of ops emitted to a runner. */
#ifndef OOMLAB_TESTS_SIM_RUNNER_H
#define OOMLAB_TESTS_SIM_RUNNER_H

#include "device/device_kind.h"
#include "run/runner.h"

/* The runner, its device in *dev (NULL, and e set, if either could not be made). */
static struct runner *sim_runner(const char *capacity, struct device **dev, struct err *e)
{
    struct capacity cap;
    *dev = capacity_parse(capacity, &cap, e) ? NULL
                                             : device_open("sim", &(struct device_open_options){.capacity = cap}, e);
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    return *dev ? runner_create(*dev, &cfg, NULL) : NULL;
}

/* Emits n ops to r in order, stopping at the first that fails: whether all ran (e says why not). */
static inline bool emit_ops(struct runner *r, const struct op *ops, size_t n, struct err *e)
{
    struct op_sink *sink = runner_sink(r);
    for (size_t i = 0; i < n; i++)
        if (sink->emit(sink, &ops[i], e))
            return false;
    return true;
}

#endif
