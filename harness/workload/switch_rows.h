/* switch_rows.h: shorthand for writing the rows of the fault and fix tables (internal to faults.c and
 * fixes.c): a switch's parameter accessors, its parameters' defaults and their key table. */
#ifndef OOMLAB_WORKLOAD_SWITCH_ROWS_H
#define OOMLAB_WORKLOAD_SWITCH_ROWS_H

#include <limits.h>
#include <string.h>

#include "scenario/key_macros.h"
#include "scenario/keytable.h"
#include "workload/spec.h"

/* Defines the accessors SWITCH_PARAMS_ACCESSORS(NAME) declares, over slot `id` of the job's `slots`
 * (fault_params or fix_params). */
#define SWITCH_PARAMS_DEFINE(slots, id, NAME)                                                        \
    _Static_assert(sizeof(struct NAME##_params) <= SWITCH_PARAMS_BYTES,                              \
                   "the parameters of " #NAME " fit a switch's slot");                               \
    struct NAME##_params NAME##_params(const struct job_spec *s)                                     \
    {                                                                                                \
        struct NAME##_params p;                                                                      \
        memcpy(&p, s->slots[id].bytes, sizeof p);                                                    \
        return p;                                                                                    \
    }                                                                                                \
    void NAME##_params_set(struct job_spec *s, const struct NAME##_params *p)                        \
    {                                                                                                \
        memcpy(s->slots[id].bytes, p, sizeof *p);                                                    \
    }

/* Defines NAME_defaults(void *p), the init of NAME's key table: writes its parameters' defaults, given
 * as designated initializers (".every = 1", or 0 when they are all zero). */
#define SWITCH_PARAMS_DEFAULTS(NAME, ...)                                                            \
    static void NAME##_defaults(void *p)                                                             \
    {                                                                                                \
        static const struct NAME##_params d = {__VA_ARGS__};                                         \
        memcpy(p, &d, sizeof d);                                                                     \
    }

/* The key table of a switch's parameters, with NAME_defaults as its init: `section` names it in the
 * docs and in messages ("faults.activation_growth"). */
#define SWITCH_PARAMS_TABLE(section, what, NAME, keys_)                                              \
    {                                                                                                \
        .name = section, .help = "The parameters of the " what " `" #NAME "`.", .keys = keys_,        \
        .nkeys = COUNT(keys_), .obj_size = sizeof(struct NAME##_params), .init = NAME##_defaults,    \
    }

#endif
