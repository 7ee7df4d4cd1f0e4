/* profile.h: stress profiles (YAML files in scenarios/stress/), `oomlab stress`'s input. A profile names one
 * kind (fill, churn, oom_storm, soak, streams), the device, the allocator settings to compare side by
 * side and that kind's parameters. It is read by the scenario loader's machinery (scenario/keytable.h:
 * the same YAML document, key tables, errors naming file:line:col) and docs/stress-keys.md is printed
 * from the same tables. */
#ifndef OOMLAB_STRESS_PROFILE_H
#define OOMLAB_STRESS_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc/config.h"
#include "util/err.h"

enum stress_kind { STRESS_FILL, STRESS_CHURN, STRESS_OOM_STORM, STRESS_SOAK, STRESS_STREAMS, STRESS_KIND_COUNT };
const char *stress_kind_name(int k);

enum size_dist { DIST_FIXED, DIST_UNIFORM, DIST_LOG_UNIFORM, DIST_MIX, DIST_SNAPSHOT, DIST_COUNT };
const char *size_dist_name(int d);

#define STRESS_MAX_MIX 16
#define STRESS_MAX_SETTINGS 8

/* Where the sizes of a profile's allocations come from. */
struct size_spec {
    int distribution;            /* enum size_dist */
    uint64_t size;               /* fixed */
    uint64_t min, max;           /* uniform, log_uniform: bounds, both included */
    uint64_t mix[STRESS_MAX_MIX]; /* mix: taken in turn */
    int nmix;
    char from_snapshot[512];     /* snapshot: a PyTorch snapshot, relative to the profile file */
    /* snapshot: the recorded request sizes (sorted) and how many requests had each, loaded with the profile */
    uint64_t *hist_sizes, *hist_counts;
    size_t nhist;
    uint64_t hist_total;
};

struct fill_spec {
    struct size_spec sizes;
    uint64_t max_blocks; /* a bound on the blocks allocated, in case capacity is vast */
};

struct churn_spec {
    struct size_spec sizes;
    uint64_t ops;        /* allocations and frees */
    double occupancy;    /* target share of the device's memory held by live blocks */
    int points;          /* fragmentation samples over the run */
    uint64_t burn_every; /* a GEMM every this many ops, a compute load while churning (0: none) */
    int burn_size;       /* its M = N = K (fp32) */
};

struct oom_storm_spec {
    struct size_spec sizes;
    uint64_t resident;   /* held for the whole run, like a model's parameters */
    int rounds;          /* OOMs to drive into and recover from */
};

struct soak_spec {
    char scenario[512];  /* relative to the profile file */
    char variant[64];
    int steps;
    int warmup;          /* steps before the step-end figures must stop moving */
};

struct streams_spec {
    struct size_spec sizes;
    uint64_t ops;        /* tensors produced on stream 0 */
    int streams;         /* stream 0 produces; 1..streams-1 consume (record_stream) */
    int lifetime;        /* a tensor is freed this many productions after its own */
    int sync_every;      /* each consumer stream synchronises after this many of its uses */
};

struct stress_profile {
    char path[512];
    char name[128];
    char title[256];
    char device[64];
    int kind;                    /* enum stress_kind */
    uint64_t seed;
    struct alloc_config settings[STRESS_MAX_SETTINGS]; /* compared side by side, in order */
    int nsettings;
    bool settings_given;         /* alloc_conf was written (a soak otherwise keeps its variant's) */
    struct fill_spec fill;
    struct churn_spec churn;
    struct oom_storm_spec oom_storm;
    struct soak_spec soak;
    struct streams_spec streams;
};

/* Loads one profile (and a snapshot it names). ERR_INPUT "file:line:col: ..." on bad input; free with
 * stress_profile_free either way. */
int stress_profile_load(const char *path, struct stress_profile *p, struct err *e);
void stress_profile_free(struct stress_profile *p);
/* The size spec the profile's kind draws from (NULL for soak). */
const struct size_spec *stress_profile_sizes(const struct stress_profile *p);

/* docs/stress-keys.md */
void stress_keys_print_markdown(FILE *f);

#endif
