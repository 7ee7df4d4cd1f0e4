/* key_macros.h: shorthand for key rows: the scenario's key tables (harness/scenario) and the parameter
 * tables of the faults and fixes (harness/workload/faults.c, fixes.c). */
#ifndef OOMLAB_KEY_MACROS_H
#define OOMLAB_KEY_MACROS_H

#include <stddef.h>

#define FIELD(S, m) .offset = offsetof(S, m), .size = sizeof(((S *)0)->m)
#define K_INT(S, key, m, lo, hi, zero, h) \
    {.name = key, .type = KEY_INT, FIELD(S, m), .imin = lo, .imax = hi, .zero_means = zero, .help = h}
#define K_BOOL(S, key, m, h) {.name = key, .type = KEY_BOOL, FIELD(S, m), .help = h}
#define K_ENUM(S, key, m, names, n, h) \
    {.name = key, .type = KEY_ENUM, FIELD(S, m), .name_of = names, .nnames = n, .help = h}
#define K_STR(S, key, m, req, zero, h) \
    {.name = key, .type = KEY_STRING, FIELD(S, m), .required = req, .zero_means = zero, .help = h}
#define K_LIST(S, key, m, count, lo, hi, h)                                                             \
    {.name = key, .type = KEY_INT_LIST, FIELD(S, m), .count_offset = offsetof(S, count), .imin = lo, \
     .imax = hi, .zero_means = "none", .help = h}
#define K_TABLE(S, key, m, table, req, h) \
    {.name = key, .type = KEY_TABLE, FIELD(S, m), .sub = &table, .required = req, .help = h}
#define COUNT(a) (sizeof a / sizeof a[0])
#define BIG (1 << 22)

#endif
