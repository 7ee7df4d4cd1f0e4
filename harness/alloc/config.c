/* config.c: PYTORCH_CUDA_ALLOC_CONF parsing: PyTorch's lexer (splits on , : [ ] and drops whitespace),
 * its key:value grammar with [k:v,...] lists, its validation rules and its error wording; the refusal of
 * what the model does not model; and the setters the allocator fixes edit a parsed config with. */
#include "alloc/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/size.h"

#define MAX_TOKENS 256

struct tokens {
    char text[MAX_TOKENS][64];
    int pos[MAX_TOKENS]; /* 1-based column of each token in the original string */
    int n;
};

static int lex(const char *s, struct tokens *t, struct err *e)
{
    char buf[64];
    int blen = 0, bstart = 0;
    t->n = 0;
    for (int i = 0;; i++) {
        char c = s[i];
        bool sep = c == ',' || c == ':' || c == '[' || c == ']';
        if (c == '\0' || sep) {
            if (blen) {
                if (t->n == MAX_TOKENS)
                    return err_set(e, ERR_INPUT, "allocator config has more than %d tokens", MAX_TOKENS);
                buf[blen] = '\0';
                memcpy(t->text[t->n], buf, (size_t)blen + 1);
                t->pos[t->n++] = bstart + 1;
                blen = 0;
            }
            if (c == '\0')
                return 0;
            if (t->n == MAX_TOKENS)
                return err_set(e, ERR_INPUT, "allocator config has more than %d tokens", MAX_TOKENS);
            t->text[t->n][0] = c;
            t->text[t->n][1] = '\0';
            t->pos[t->n++] = i + 1;
        } else if (!isspace((unsigned char)c)) {
            if (blen == 0)
                bstart = i;
            if (blen == (int)sizeof buf - 1)
                return err_set(e, ERR_INPUT, "allocator config: token at column %d is too long", bstart + 1);
            buf[blen++] = c;
        }
    }
}

/* Every error names where it happened: "allocator config 'S', column N: <PyTorch's message>". */
static int fail(struct err *e, const char *s, const struct tokens *t, int i, const char *msg)
{
    int col = i < t->n ? t->pos[i] : (int)strlen(s) + 1;
    return err_set(e, ERR_INPUT, "allocator config '%s', column %d: %s", s, col, msg);
}

static int expect_token(const char *s, const struct tokens *t, int i, char c, struct err *e)
{
    if (i < t->n && t->text[i][0] == c && t->text[i][1] == '\0')
        return 0;
    char msg[96];
    snprintf(msg, sizeof msg, "Error parsing CachingAllocator::AllocatorConfig settings, expected %c", c);
    return fail(e, s, t, i, msg);
}

static bool is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* std::stoi-like: an optionally signed decimal integer, the whole token. */
static int parse_uint(const char *s, const struct tokens *t, int i, const char *key, uint64_t *out, struct err *e)
{
    char msg[160];
    if (i >= t->n) {
        snprintf(msg, sizeof msg, "Error, expecting %s value", key);
        return fail(e, s, t, i, msg);
    }
    const char *p = t->text[i];
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || *end || errno) {
        snprintf(msg, sizeof msg, "invalid value '%s' for %s: expected an integer", p, key);
        return fail(e, s, t, i, msg);
    }
    if (v < 0) {
        snprintf(msg, sizeof msg, "invalid value '%s' for %s: must not be negative", p, key);
        return fail(e, s, t, i, msg);
    }
    *out = (uint64_t)v;
    return 0;
}

static int parse_double(const char *s, const struct tokens *t, int i, const char *key, double *out, struct err *e)
{
    char msg[160];
    if (i >= t->n) {
        snprintf(msg, sizeof msg, "Error, expecting %s value", key);
        return fail(e, s, t, i, msg);
    }
    char *end;
    errno = 0;
    double v = strtod(t->text[i], &end);
    if (end == t->text[i] || *end || errno) {
        snprintf(msg, sizeof msg, "invalid value '%s' for %s: expected a number", t->text[i], key);
        return fail(e, s, t, i, msg);
    }
    *out = v;
    return 0;
}

static int parse_bool(const char *s, const struct tokens *t, int i, const char *key, bool *out, struct err *e)
{
    if (i < t->n && (!strcmp(t->text[i], "True") || !strcmp(t->text[i], "False"))) {
        *out = !strcmp(t->text[i], "True");
        return 0;
    }
    char msg[128];
    snprintf(msg, sizeof msg, "Expected a single True/False argument for %s", key);
    return fail(e, s, t, i, msg);
}

/* max_split_size_mb and max_non_split_rounding_mb are integers >= 20 (MiB): NULL if `mb` is one, else
 * PyTorch's message in msg. */
static const char *mb_option_problem(const char *key, uint64_t mb, char *msg, size_t len)
{
    if (mb >= 20)
        return NULL;
    snprintf(msg, len, "CachingAllocator option %s too small, must be >= 20", key);
    return msg;
}

/* Bytes of an MiB option, capped at SIZE_MAX / 1 MiB as PyTorch caps it. */
static uint64_t mb_option_bytes(uint64_t mb)
{
    return (mb > UINT64_MAX / MiB ? UINT64_MAX / MiB : mb) * MiB;
}

static int parse_mb_option(const char *s, const struct tokens *t, int *i, const char *key, uint64_t *out,
                           struct err *e)
{
    uint64_t mb;
    char msg[128];
    if (expect_token(s, t, ++*i, ':', e) || parse_uint(s, t, ++*i, key, &mb, e))
        return -1;
    if (mb_option_problem(key, mb, msg, sizeof msg))
        return fail(e, s, t, *i, msg);
    *out = mb_option_bytes(mb);
    return 0;
}

static const char gc_threshold_range[] = "garbage_collect_threshold is invalid, set it in (0.0, 1.0)";

static bool gc_threshold_valid(double v)
{
    return v > 0 && v < 1.0;
}

static int parse_roundup(const char *s, const struct tokens *t, int *i, struct alloc_config *c, struct err *e)
{
    const char *bad_div = "For roundups, the divisions has to be power of 2 or 0 to disable roundup";
    if (expect_token(s, t, ++*i, ':', e))
        return -1;
    if (++*i >= t->n)
        return fail(e, s, t, *i, "Error, expecting roundup_power2_divisions value");
    if (strcmp(t->text[*i], "[") != 0) {
        uint64_t d;
        if (parse_uint(s, t, *i, "roundup_power2_divisions", &d, e))
            return -1;
        if (!is_pow2(d))
            return fail(e, s, t, *i, "For roundups, the divisions has to be power of 2");
        for (int k = 0; k < ALLOC_ROUNDUP_INTERVALS; k++)
            c->roundup_power2_divisions[k] = (uint32_t)d;
        return 0;
    }
    bool first = true;
    int last_index = -1;
    while (++*i < t->n && strcmp(t->text[*i], "]") != 0) {
        int key_at = *i;
        uint64_t div;
        if (expect_token(s, t, ++*i, ':', e))
            return -1;
        if (++*i >= t->n)
            return fail(e, s, t, *i, "Error parsing roundup_power2_divisions value");
        if (parse_uint(s, t, *i, "roundup_power2_divisions", &div, e))
            return -1;
        if (div != 0 && !is_pow2(div))
            return fail(e, s, t, *i, bad_div);
        if (!strcmp(t->text[key_at], ">")) {
            for (int k = last_index + 1; k < ALLOC_ROUNDUP_INTERVALS; k++)
                c->roundup_power2_divisions[k] = (uint32_t)div;
        } else {
            uint64_t mb;
            if (parse_uint(s, t, key_at, "roundup_power2_divisions interval", &mb, e))
                return -1;
            if (!is_pow2(mb))
                return fail(e, s, t, key_at, "For roundups, the intervals have to be power of 2");
            int index = 63 - __builtin_clzll(mb);
            if (index > ALLOC_ROUNDUP_INTERVALS - 1)
                index = ALLOC_ROUNDUP_INTERVALS - 1;
            if (first) {
                for (int k = 0; k < index; k++)
                    c->roundup_power2_divisions[k] = (uint32_t)div;
                first = false;
            }
            c->roundup_power2_divisions[index] = (uint32_t)div;
            last_index = index;
        }
        if (*i + 1 < t->n && strcmp(t->text[*i + 1], "]") != 0 && expect_token(s, t, ++*i, ',', e))
            return -1;
    }
    if (*i >= t->n)
        return fail(e, s, t, *i, "Error parsing CachingAllocator::AllocatorConfig settings, expected ]");
    return 0;
}

static int parse_key(const char *s, const struct tokens *t, int *i, struct alloc_config *c, struct err *e)
{
    const char *key = t->text[*i];
    if (!strcmp(key, "max_split_size_mb"))
        return parse_mb_option(s, t, i, key, &c->max_split_size, e);
    if (!strcmp(key, "max_non_split_rounding_mb"))
        return parse_mb_option(s, t, i, key, &c->max_non_split_rounding, e);
    if (!strcmp(key, "roundup_power2_divisions"))
        return parse_roundup(s, t, i, c, e);
    if (!strcmp(key, "garbage_collection_threshold")) {
        double v;
        if (expect_token(s, t, ++*i, ':', e) || parse_double(s, t, ++*i, key, &v, e))
            return -1;
        if (!gc_threshold_valid(v))
            return fail(e, s, t, *i, gc_threshold_range);
        c->garbage_collection_threshold = v;
        return 0;
    }
    if (!strcmp(key, "per_process_memory_fraction")) {
        double v;
        if (expect_token(s, t, ++*i, ':', e) || parse_double(s, t, ++*i, key, &v, e))
            return -1;
        if (!(v >= 0 && v <= 1.0))
            return fail(e, s, t, *i, "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
        c->per_process_memory_fraction = v;
        return 0;
    }
    if (!strcmp(key, "backend")) {
        if (expect_token(s, t, ++*i, ':', e))
            return -1;
        if (++*i >= t->n)
            return fail(e, s, t, *i, "Error parsing allocator backend value");
        if (!strcmp(t->text[*i], "cudaMallocAsync")) /* valid for PyTorch, but not what the model models */
            return fail(e, s, t, *i,
                        "backend:cudaMallocAsync is the CUDA driver's stream-ordered allocator, which oomlab does "
                        "not model (it models PyTorch's native caching allocator)");
        if (strcmp(t->text[*i], "native"))
            return fail(e, s, t, *i, "Unknown allocator backend, options are native and cudaMallocAsync");
        return 0;
    }
    if (!strcmp(key, "pinned_num_register_threads")) {
        uint64_t v;
        if (expect_token(s, t, ++*i, ':', e) || parse_uint(s, t, ++*i, key, &v, e))
            return -1;
        if (!is_pow2(v))
            return fail(e, s, t, *i, "Number of register threads has to be power of 2");
        if (v > 128)
            return fail(e, s, t, *i, "Number of register threads should be less than or equal to 128");
        c->pinned_num_register_threads = (uint32_t)v;
        return 0;
    }
    static const struct {
        const char *name, *canonical;
        size_t offset;
    } bools[] = {
        {"expandable_segments", "expandable_segments", offsetof(struct alloc_config, expandable_segments)},
        {"release_lock_on_cudamalloc", "release_lock_on_cudamalloc",
         offsetof(struct alloc_config, release_lock_on_cudamalloc)},
        {"release_lock_on_hipmalloc", "release_lock_on_cudamalloc",
         offsetof(struct alloc_config, release_lock_on_cudamalloc)},
        {"pinned_use_cuda_host_register", "pinned_use_cuda_host_register",
         offsetof(struct alloc_config, pinned_use_cuda_host_register)},
        {"pinned_use_hip_host_register", "pinned_use_cuda_host_register",
         offsetof(struct alloc_config, pinned_use_cuda_host_register)},
        {"pinned_use_background_threads", "pinned_use_background_threads",
         offsetof(struct alloc_config, pinned_use_background_threads)},
        {"graph_capture_record_stream_reuse", "graph_capture_record_stream_reuse",
         offsetof(struct alloc_config, graph_capture_record_stream_reuse)},
    };
    for (size_t k = 0; k < sizeof bools / sizeof bools[0]; k++) {
        if (!strcmp(key, bools[k].name)) {
            if (expect_token(s, t, ++*i, ':', e))
                return -1;
            return parse_bool(s, t, ++*i, bools[k].canonical, (bool *)((char *)c + bools[k].offset), e);
        }
    }
    char msg[160];
    snprintf(msg, sizeof msg, "Unrecognized key '%s' in CUDA allocator config.", key);
    return fail(e, s, t, *i, msg);
}

void alloc_config_default(struct alloc_config *c)
{
    memset(c, 0, sizeof *c);
    c->max_split_size = UINT64_MAX;
    c->max_non_split_rounding = 20 * MiB;
    c->per_process_memory_fraction = 1.0;
    c->pinned_num_register_threads = 1;
}

int alloc_config_parse(struct alloc_config *c, const char *s, struct err *e)
{
    struct alloc_config next = *c;
    next.max_split_size = UINT64_MAX;
    memset(next.roundup_power2_divisions, 0, sizeof next.roundup_power2_divisions);
    next.garbage_collection_threshold = 0;
    if (!s)
        s = "";
    if (strlen(s) >= sizeof next.text)
        return err_set(e, ERR_INPUT, "allocator config is longer than %zu characters", sizeof next.text - 1);
    strcpy(next.text, s);

    struct tokens t;
    if (lex(s, &t, e))
        return -1;
    for (int i = 0; i < t.n; i++) {
        if (parse_key(s, &t, &i, &next, e))
            return -1;
        if (i + 1 < t.n && expect_token(s, &t, ++i, ',', e))
            return -1;
    }
    *c = next;
    return 0;
}

/* Appends the entry to c->text, after a comma unless the text is empty or already ends in one. */
static int append_setting(struct alloc_config *c, struct err *e, const char *fmt, ...)
{
    char entry[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(entry, sizeof entry, fmt, ap);
    va_end(ap);
    size_t used = strlen(c->text);
    const char *sep = used && c->text[used - 1] != ',' ? "," : "";
    if (used + strlen(sep) + strlen(entry) >= sizeof c->text)
        return err_set(e, ERR_INPUT, "allocator config '%s' with %s added is longer than %zu characters", c->text,
                       entry, sizeof c->text - 1);
    snprintf(c->text + used, sizeof c->text - used, "%s%s", sep, entry);
    return 0;
}

int alloc_config_set_expandable_segments(struct alloc_config *c, bool on, struct err *e)
{
    if (append_setting(c, e, "expandable_segments:%s", on ? "True" : "False"))
        return -1;
    c->expandable_segments = on;
    return 0;
}

int alloc_config_set_max_split_size_mb(struct alloc_config *c, uint64_t mb, struct err *e)
{
    char msg[128];
    if (mb_option_problem("max_split_size_mb", mb, msg, sizeof msg))
        return err_set(e, ERR_INPUT, "max_split_size_mb:%llu: %s", (unsigned long long)mb, msg);
    if (append_setting(c, e, "max_split_size_mb:%llu", (unsigned long long)mb))
        return -1;
    c->max_split_size = mb_option_bytes(mb);
    return 0;
}

int alloc_config_set_garbage_collection_threshold(struct alloc_config *c, double threshold, struct err *e)
{
    if (!gc_threshold_valid(threshold))
        return err_set(e, ERR_INPUT, "garbage_collection_threshold:%g: %s", threshold, gc_threshold_range);
    if (append_setting(c, e, "garbage_collection_threshold:%g", threshold))
        return -1;
    c->garbage_collection_threshold = threshold;
    return 0;
}
