/* gen.c: the generator context's plumbing: interned tag strings, module scopes, the tensor slab with
 * reference counts, and the emission of ALLOC / FREE / KERNEL / PHASE / MARK ops to the sink. */
#include "workload/gen.h"
#include "util/map_array.h"
#include "workload/strpool.h"
#include "util/size.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *intern_len(struct gen *g, const char *s, size_t len)
{
    const char *r = strpool_intern_len(g->pool, s, len);
    if (!r && !g->failed) {
        g->failed = 1;
        err_set(g->e, ERR_INTERNAL, "workload: out of host memory interning a tag");
    }
    return r ? r : "?";
}

const char *gen_intern(struct gen *g, const char *s)
{
    return intern_len(g, s, strlen(s));
}

/* Tags and scopes are built by copying, not printf: gen_tag runs for every tensor a run makes. */
const char *gen_tag(struct gen *g, const char *leaf)
{
    char buf[640];
    if (!leaf || !*leaf)
        return g->scope_tag ? g->scope_tag : (g->scope_tag = gen_intern(g, g->scope));
    size_t at = 0, n = strnlen(leaf, sizeof buf - 1);
    if (g->scope_len) {
        memcpy(buf, g->scope, (size_t)g->scope_len); /* scope_len < sizeof g->scope < sizeof buf - 1 */
        buf[g->scope_len] = '.';
        at = (size_t)g->scope_len + 1;
        if (n > sizeof buf - 1 - at)
            n = sizeof buf - 1 - at;
    }
    memcpy(buf + at, leaf, n);
    buf[at + n] = '\0';
    return intern_len(g, buf, at + n);
}

bool gen_tag_is(const struct gen *g, const char *s, const char *leaf)
{
    if (!leaf || !*leaf)
        return strcmp(s, g->scope) == 0;
    size_t n = (size_t)g->scope_len;
    if (n && (strncmp(s, g->scope, n) != 0 || s[n] != '.'))
        return false;
    return strcmp(s + (n ? n + 1 : 0), leaf) == 0; /* a tag gen_tag cut short is never equal: the slow way then */
}

const char *gen_dotted(char *buf, size_t len, const char *a, const char *b)
{
    size_t at = strnlen(a, len - 1);
    memcpy(buf, a, at);
    if (at < len - 1)
        buf[at++] = '.';
    size_t n = strnlen(b, len - 1 - at);
    memcpy(buf + at, b, n);
    buf[at + n] = '\0';
    return buf;
}

/* fmt with ap as vsnprintf would print it into part (size len), when its conversions are only %s and
 * %d (every gen_push caller's); false for any other, which the caller prints with vsnprintf. */
static bool format_part(char *part, size_t len, const char *fmt, va_list ap)
{
    for (const char *f = fmt; (f = strchr(f, '%')); f += 2)
        if (f[1] != 's' && f[1] != 'd')
            return false;
    size_t at = 0;
    for (const char *f = fmt; *f && at + 1 < len; f++) {
        char num[16];
        const char *text = f;
        size_t n = strcspn(f, "%"); /* a run of plain text, copied at once */
        if (n) {
            f += n - 1;
        } else {
            f++;
            if (*f == 's') {
                text = va_arg(ap, const char *);
                n = strlen(text);
            } else {
                int v = va_arg(ap, int);
                unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
                char *p = num + sizeof num;
                do
                    *--p = (char)('0' + u % 10);
                while (u /= 10);
                if (v < 0)
                    *--p = '-';
                text = p;
                n = (size_t)(num + sizeof num - p);
            }
        }
        if (n > len - 1 - at)
            n = len - 1 - at;
        memcpy(part + at, text, n);
        at += n;
    }
    part[at] = '\0';
    return true;
}

void gen_push(struct gen *g, const char *fmt, ...)
{
    char part[256];
    const char *text = part;
    va_list ap;
    va_start(ap, fmt);
    if (fmt[0] == '%' && fmt[1] == 's' && !fmt[2]) { /* most pushes: a name as it is, cut as part would cut it */
        text = va_arg(ap, const char *);
    } else if (!format_part(part, sizeof part, fmt, ap)) {
        va_end(ap);
        va_start(ap, fmt);
        vsnprintf(part, sizeof part, fmt, ap);
    }
    va_end(ap);
    if (g->scope_depth < (int)(sizeof g->scope_marks / sizeof g->scope_marks[0]))
        g->scope_marks[g->scope_depth] = g->scope_len;
    g->scope_depth++;
    g->scope_tag = NULL;
    size_t dot = g->scope_len ? 1 : 0, n = strnlen(text, sizeof part - 1);
    if (g->scope_len + dot + n < sizeof g->scope) { /* a part that does not fit is left out */
        if (dot)
            g->scope[g->scope_len] = '.';
        memcpy(g->scope + g->scope_len + dot, text, n);
        g->scope_len += (int)(dot + n);
        g->scope[g->scope_len] = '\0';
    }
}

void gen_pop(struct gen *g)
{
    if (g->scope_depth == 0)
        return;
    g->scope_depth--;
    g->scope_tag = NULL;
    if (g->scope_depth < (int)(sizeof g->scope_marks / sizeof g->scope_marks[0]))
        g->scope_len = g->scope_marks[g->scope_depth];
    g->scope[g->scope_len] = 0;
}

int gen_phase(struct gen *g, const char *name)
{
    struct op op = {.kind = OP_PHASE, .stream = g->stream, .name = name};
    return gen_emit(g, &op);
}

int gen_mark(struct gen *g, const char *label)
{
    struct op op = {.kind = OP_MARK, .stream = g->stream, .name = gen_intern(g, label)};
    return gen_emit(g, &op);
}

void gen_hold(struct gen *g, struct tref_list *list, tref x)
{
    if (x == TNONE)
        return;
    if (list->n == list->cap) {
        int32_t cap = list->cap ? list->cap * 2 : 64;
        tref *nv = realloc(list->v, (size_t)cap * sizeof *nv);
        if (!nv) {
            if (!g->failed)
                err_set(g->e, ERR_INTERNAL, "workload: out of host memory holding tensors");
            g->failed = 1;
            t_release(g, x);
            return;
        }
        list->v = nv;
        list->cap = cap;
    }
    list->v[list->n++] = x;
}

void gen_release_held(struct gen *g, struct tref_list *list)
{
    for (int32_t i = 0; i < list->n; i++)
        t_release(g, list->v[i]);
    list->n = 0;
}

/* An ALLOC, MANAGED_ALLOC or FREE op of a tensor to the sink, built in g->mem_op. */
static void emit_mem(struct gen *g, enum op_kind kind, uint8_t category, uint64_t id, uint64_t bytes, const char *name)
{
    struct op *op = &g->mem_op;
    op->kind = kind;
    op->category = category;
    op->stream = g->stream;
    op->id = id;
    op->bytes = bytes;
    op->name = name;
    gen_emit(g, op);
}

_Static_assert(sizeof(struct tensor) == 72, "struct tensor: the slab's pages (gen.h)");

/* slab_get's slow way: a slot never used, growing the slab if it is full. */
static tref slab_new(struct gen *g)
{
    if ((size_t)g->nt == g->cap_t && map_array_grow((void **)&g->t, &g->cap_t, (size_t)g->nt + 1, sizeof *g->t) < 0) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory for tensors");
        g->failed = 1;
        return TNONE;
    }
    return g->nt++;
}

static inline tref slab_get(struct gen *g)
{
    tref x = g->free_t;
    if (x < 0)
        return slab_new(g);
    g->free_t = g->t[x].next_free;
    return x;
}

/* A bound per dim, by the dims' count, under which no product of the dims reaches 2^56 bytes' worth of
 * elements, below every dtype's limit (SIZE_LIMIT / 8 = 2^59 elements): such dims need no check each. */
static const uint64_t dims_small[TMAX_DIMS + 1] = {1, UINT64_C(1) << 56, UINT64_C(1) << 28, UINT64_C(1) << 18,
                                                   UINT64_C(1) << 14};
_Static_assert(SIZE_LIMIT / 8 >= UINT64_C(1) << 56, "dims_small: every dtype's limit is at least 2^56 elements");

/* Copies the dims to t and says whether a tensor of them fits SIZE_LIMIT bytes, with its element count in
 * *numel if so. Every partial product of the dims is checked, in the order t_numel multiplies them, so no
 * later product of this tensor's dims can overflow; most tensors' dims are under dims_small (none negative:
 * a negative dim is above it as unsigned), and their product is taken without a check. */
static inline __attribute__((always_inline)) bool dims_fit(struct tensor *t, const int64_t *dims, enum dtype dt,
                                                         int64_t *numel)
{
    const unsigned size = dtype_size(dt); /* a power of two: a shift, not a division, per tensor */
    uint64_t n = 1, any = 0;
    for (int i = 0; i < t->ndim; i++) {
        t->dims[i] = dims[i];
        any |= (uint64_t)dims[i];
        n *= (uint64_t)dims[i]; /* unsigned: wraps, and is taken only when every dim is small */
    }
    if (__builtin_expect(any < dims_small[t->ndim] && size, 1)) {
        *numel = (int64_t)n;
        return true;
    }
    const uint64_t most = size ? SIZE_LIMIT >> __builtin_ctz(size) : 0;
    bool over = false; /* a dim is negative, or a partial product is above most (a product after that is moot) */
    n = 1;
    for (int i = 0; i < t->ndim; i++) {
        over |= dims[i] < 0;
        over |= __builtin_mul_overflow(n, (uint64_t)dims[i], &n);
        over |= n > most;
    }
    *numel = (int64_t)n;
    return !over;
}

/* The error for a tensor too large to model, naming it, its shape and dtype; the tensor is kept with
 * every dim 1, so the generator's arithmetic on it stays in range until it stops. */
static __attribute__((cold, noinline)) void refuse_size(struct gen *g, struct tensor *t, const int64_t *dims, int ndim,
                                                        enum dtype dt, const char *tag)
{
    char shape[128] = "";
    size_t used = 0;
    for (int i = 0; i < ndim && used < sizeof shape; i++) {
        int n = snprintf(shape + used, sizeof shape - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    bool negative = false;
    for (int i = 0; i < ndim; i++)
        negative |= dims[i] < 0;
    if (!g->failed) {
        if (negative)
            err_set(g->e, ERR_INTERNAL, "workload: tensor %s [%s] has a negative dimension", tag ? tag : "?", shape);
        else
            err_set(g->e, ERR_INPUT,
                    "workload: tensor %s [%s] of %s is larger than 4 EiB (2^62 bytes), the largest size oomlab "
                    "models: make the model or the job smaller",
                    tag ? tag : "?", shape, dtype_name(dt));
    }
    g->failed = 1;
    for (int i = 0; i < ndim; i++)
        t->dims[i] = 1;
}

/* Inlined into t_new, t_new2 (the dims' count a constant) and t_like (a third of the tensors made). */
static inline __attribute__((always_inline)) tref t_make(struct gen *g, const int64_t *dims, int ndim, enum dtype dt,
                                                         enum category cat, const char *tag, enum op_kind kind)
{
    tref x = slab_get(g);
    if (x == TNONE)
        return TNONE;
    struct tensor *t = &g->t[x];
    *t = (struct tensor){.ndim = (uint8_t)(ndim < TMAX_DIMS ? ndim : TMAX_DIMS),
                         .dtype = (uint8_t)dt,
                         .category = (uint8_t)cat,
                         .refs = 1,
                         .grad = TNONE,
                         .param = -1,
                         .id = ++g->next_id};
    int64_t n;
    if (!dims_fit(t, dims, dt, &n)) {
        refuse_size(g, t, dims, t->ndim, dt, tag);
        n = 1; /* refuse_size made every dim 1 */
    }
    t->bytes = (uint64_t)n * dtype_size(dt);
    g->live_bytes += (int64_t)t->bytes;
    emit_mem(g, kind, (uint8_t)cat, t->id, t->bytes, tag);
    return x;
}

tref t_new(struct gen *g, const int64_t *dims, int ndim, enum dtype dt, enum category cat, const char *tag)
{
    return t_make(g, dims, ndim, dt, cat, tag, OP_ALLOC);
}

tref t_new_managed(struct gen *g, int64_t a, int64_t b, enum dtype dt, enum category cat, const char *tag)
{
    int64_t d[2] = {a, b};
    return t_make(g, d, 2, dt, cat, tag, OP_MANAGED_ALLOC);
}

tref t_new2(struct gen *g, int64_t a, int64_t b, enum dtype dt, enum category cat, const char *tag)
{
    int64_t d[2] = {a, b};
    return t_make(g, d, 2, dt, cat, tag, OP_ALLOC);
}

tref t_like(struct gen *g, tref x, enum dtype dt, enum category cat, const char *tag)
{
    int64_t d[TMAX_DIMS]; /* a copy: taking a slot may move the slab */
    memcpy(d, g->t[x].dims, sizeof d);
    return t_make(g, d, g->t[x].ndim, dt, cat, tag, OP_ALLOC);
}

static void slab_put(struct gen *g, tref x)
{
    g->t[x].next_free = g->free_t;
    g->t[x].refs = -1;
    g->free_t = x;
}

void t_release_last(struct gen *g, tref x)
{
    struct tensor *t = &g->t[x];
    const bool backed = !t->unbacked;
    const uint64_t id = t->id;
    if (backed)
        g->live_bytes -= (int64_t)t->bytes;
    t->unbacked = false;
    if (t->holds == 0 && t->grad == TNONE)
        slab_put(g, x);
    if (backed) /* last: only g lives across the sink's call (the sink never reads the slab) */
        emit_mem(g, OP_FREE, 0, id, 0, NULL);
}

void t_storage_free(struct gen *g, tref x)
{
    struct tensor *t = &g->t[x];
    if (t->unbacked)
        return;
    emit_mem(g, OP_FREE, 0, t->id, 0, NULL);
    g->live_bytes -= (int64_t)t->bytes;
    t->unbacked = true;
}

void t_storage_alloc(struct gen *g, tref x, uint64_t bytes)
{
    struct tensor *t = &g->t[x];
    if (!t->unbacked)
        return;
    t->unbacked = false;
    t->bytes = bytes;
    t->id = ++g->next_id;
    g->live_bytes += (int64_t)bytes;
    emit_mem(g, OP_ALLOC, t->category, t->id, bytes, t->param >= 0 ? g->params[t->param].tag : NULL);
}

/* Called by the tape when it lets go of a tensor's identity: recycles the slot once nothing names it. */
void t_unhold(struct gen *g, tref x)
{
    if (x == TNONE)
        return;
    struct tensor *t = &g->t[x];
    if (--t->holds == 0 && t->refs == 0 && t->grad == TNONE)
        slab_put(g, x);
}

enum dtype gen_promote(enum dtype a, enum dtype b)
{
    if (a == b)
        return a;
    if (a == DT_F32 || b == DT_F32)
        return DT_F32;
    return a == DT_U8 || a == DT_I64 ? b : a;
}
