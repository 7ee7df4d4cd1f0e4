/* switch_rows.h: shorthand for writing the rows of the fault and fix tables (internal to faults.c and
 * fixes.c): a switch's parameter accessors and the key table of its parameters. */
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

/* The key table of a switch's parameters: `section` names it in the docs and in messages
 * ("faults.activation_growth"), `init` writes the defaults (NULL: all zero). */
#define SWITCH_PARAMS_TABLE(section, what, NAME, keys_, init_)                                        \
    {                                                                                                \
        .name = section, .help = "The parameters of the " what " `" #NAME "`.", .keys = keys_,        \
        .nkeys = COUNT(keys_), .obj_size = sizeof(struct NAME##_params), .init = init_,              \
    }

#endif
