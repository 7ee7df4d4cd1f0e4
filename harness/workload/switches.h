/* switches.h: faults and fixes as rows of two tables (faults.c, fixes.c). A row is everything about one
 * switch but the generator code that acts on it: its name and help, its parameters (a struct of its
 * own, declared in faults.h or fixes.h and described by key rows of the scenario loader: type, bounds,
 * default, help; the loader, docs/scenario-keys.md, `oomlab list` and job validation all read those
 * rows), what it changes in the job's settings, and for an allocator fix the edit it makes to the
 * variant's parsed allocator config. C++-includable. */
#ifndef OOMLAB_WORKLOAD_SWITCHES_H
#define OOMLAB_WORKLOAD_SWITCHES_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct job_spec;
struct key_table;
struct alloc_config;

#define SWITCH_PARAMS_BYTES 32

/* One switch's parameters inside a job: its row's parameter struct, stored as bytes so that a job
 * holds every switch's without naming their types; read and written through the accessors below. */
struct switch_params {
    unsigned char bytes[SWITCH_PARAMS_BYTES];
};

struct switch_info {
    int id;                                /* enum fault_id or enum fix_id: its bit and its slot in a job */
    const char *name;
    const char *help;                      /* one line for the docs and `oomlab list` */
    const struct key_table *params;        /* its parameters (init writes the defaults); NULL: none */
    void (*settings)(struct job_spec *s);  /* what it changes in the job's settings (NULL: nothing) */
    /* Allocator fixes: the settings they add to the variant's allocator config (NULL: not one). */
    int (*alloc_edit)(struct alloc_config *c, const struct job_spec *s, struct err *e);
    /* Fixes: why it changes nothing in job s ("attention is already SDPA"), or NULL when it may act
     * (`oomlab advise` says so beside the run that proves it). NULL hook: no reason known. */
    const char *(*inert)(const struct job_spec *s);
};

/* Declares the accessors of the parameters of switch NAME, whose struct is `struct NAME_params`:
 * NAME_params(spec) returns a copy, NAME_params_set(spec, &p) stores one. faults.c and fixes.c define
 * them beside the row. */
#define SWITCH_PARAMS_ACCESSORS(NAME)                                  \
    struct NAME##_params NAME##_params(const struct job_spec *s);      \
    void NAME##_params_set(struct job_spec *s, const struct NAME##_params *p)

/* Every switch of a job at once, in table order (faults before fixes). */
void switches_init(struct job_spec *s);          /* every switch's parameters at its row's defaults */
/* The parameters of the switches that are on, within their rows' bounds ("fixes.every: ..."). */
int switches_check(const struct job_spec *s, struct err *e);
void switches_apply_settings(struct job_spec *s); /* the settings hooks of the switches that are on */
/* The allocator fixes that are on edit c in table order; c->text gains their settings. */
int switches_edit_alloc(const struct job_spec *s, struct alloc_config *c, struct err *e);
/* What an allocator fix adds to an empty allocator config with its default parameters
 * ("max_split_size_mb:128"); "" for other switches. */
void switch_alloc_setting(const struct switch_info *fix, char *buf, size_t len);

/* The row named `name` in a table; NULL if absent. */
const struct switch_info *switch_find(const struct switch_info *table, int n, const char *name);
/* Sets the bit of the row named `name` in *bits; an unknown name is an error naming `what` ("fault"). */
int switch_enable(const struct switch_info *table, int n, const char *what, uint32_t *bits, const char *name,
                  struct err *e);

#ifdef __cplusplus
}
#endif

#endif
