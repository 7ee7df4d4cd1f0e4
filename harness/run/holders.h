/* holders.h: what holds the memory. A runner observer that keeps the live bytes of every holder (the
 * module that allocated them, with the first layer index folded so 36 layers are one line, or a replay's
 * allocation site; their category; the phase they were allocated in) and reports the largest holders at
 * the allocated peak and at the first OOM, and the holders that grow step over step (leaks: what grew at
 * every step boundary from some step on). */
#ifndef OOMLAB_HOLDERS_H
#define OOMLAB_HOLDERS_H

#include <stddef.h>
#include <stdint.h>

#include "run/runner.h"

#define HOLDERS_TOP 8
#define HOLDER_TAG_MAX 160

struct holder {
    char tag[HOLDER_TAG_MAX]; /* "transformer.h.*.mlp.c_fc", a site "train.py:42 step", or "-" */
    uint8_t category;         /* enum category */
    char phase[32];           /* the phase the bytes were allocated in */
    uint64_t bytes, count;    /* block bytes and live allocations */
};

struct holders_view {
    struct holder top[HOLDERS_TOP]; /* largest first */
    size_t n;
    uint64_t total;                 /* every holder's bytes together */
    int64_t step;                   /* the step it was seen in */
    bool seen;
};

struct leak {
    char tag[HOLDER_TAG_MAX];
    uint8_t category;
    int64_t since_step;   /* grew at every step boundary from this step on */
    uint64_t grown;       /* bytes it grew by since then */
};

struct holders_result {
    struct holders_view at_peak; /* when allocated memory peaked */
    struct holders_view at_oom;  /* at the first OOM */
    struct leak leaks[HOLDERS_TOP];
    size_t nleaks;
};

struct holders;

struct holders *holders_create(void); /* NULL without host memory */
struct run_observer *holders_base(struct holders *h);
/* The views and leaks so far (call after the run). 0, or -1 if host memory ran out on the way. */
int holders_finish(struct holders *h, struct holders_result *out);
void holders_destroy(struct holders *h);

/* A module path with its first numeric component folded: "decoder.block.3.layer.2.ffn" becomes
 * "decoder.block.*.layer.2.ffn" (the layer index; later ones name sublayers), in buf, cut to len - 1
 * bytes (len >= 1). Returns its length. */
size_t holders_fold_tag(const char *tag, char *buf, size_t len);

#endif
