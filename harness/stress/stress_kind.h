/* stress_kind.h: internal to harness/stress: what a profile kind's generator is given (one allocator
 * setting's runner on its device), the helpers every generator uses, and the generators. */
#ifndef OOMLAB_STRESS_KIND_H
#define OOMLAB_STRESS_KIND_H

#include "program/program.h"
#include "run/runner.h"
#include "stress/stress.h"

struct job_spec;

struct stress_ctx {
    const struct stress_profile *p;
    struct runner *run;
    struct stress_result *res;
    uint64_t rng;      /* splitmix64 state, from the profile's seed */
    uint64_t drawn;    /* sizes drawn so far (a mix takes them in turn) */
    uint64_t next_id;  /* tensor ids: 1, 2, ... */
    struct job_spec *job; /* soak: the variant's job with the soak's steps */
};

/* Emits one op. 0; 1 when it was an ALLOC that hit an OOM (the runner then waits for stress_recover);
 * -1 with e on an error. */
int stress_emit(struct stress_ctx *c, const struct op *op, struct err *e);
/* ALLOC of `bytes` under a new id (*id), as stress_emit. */
int stress_alloc(struct stress_ctx *c, uint64_t bytes, int stream, enum category cat, const char *tag, uint64_t *id,
                 struct err *e);
int stress_free(struct stress_ctx *c, uint64_t id, struct err *e);
/* After an OOM: frees every live tensor keep() refuses (NULL: none is freed) and takes ops again. */
int stress_recover(struct stress_ctx *c, bool (*keep)(void *user, uint64_t id, uint8_t category), void *user,
                   struct err *e);
/* The next size of the kind's distribution; uniform random integers in [0, n) */
uint64_t stress_draw_size(struct stress_ctx *c, const struct size_spec *s);
uint64_t stress_random(struct stress_ctx *c, uint64_t n);
/* The allocator now, as a point after c->res->ops ops. */
struct stress_point stress_point_now(struct stress_ctx *c);
/* Adds a check to the result (its detail formatted like printf). */
void stress_check(struct stress_result *r, const char *what, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The allocator's invariants: PyTorch's consistency of its stats with its blocks (alloc/snapshot.h),
 * allocated <= active <= reserved, requested <= active, peaks >= currents. false with why. */
bool stress_invariants(const struct allocator *a, char *why, size_t len);

/* churn's compute load (burn.c): its buffers, a GEMM on them, and their end. 0, or -1 with e (ERR_INPUT
 * when the buffers do not fit). */
struct stress_burn {
    uint64_t ids[3];
    int n;
};
int stress_burn_start(struct stress_ctx *c, struct stress_burn *b, struct err *e);
int stress_burn_gemm(struct stress_ctx *c, const struct stress_burn *b, struct err *e);
int stress_burn_end(struct stress_ctx *c, const struct stress_burn *b, struct err *e);

int stress_fill(struct stress_ctx *c, struct err *e);
int stress_churn(struct stress_ctx *c, struct err *e);
int stress_oom_storm(struct stress_ctx *c, struct err *e);
int stress_soak(struct stress_ctx *c, struct err *e);
int stress_streams(struct stress_ctx *c, struct err *e);

#endif
