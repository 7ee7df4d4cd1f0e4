/* text_trace.c: reading oomlab's text form of an op program (report/program_text.h prints it) and
 * feeding each line's op to a sink as it is read, in constant memory but for the live IDs:
 *     alloc ID BYTES [STREAM] [CATEGORY [TAG]]   STREAM: sN or N (default 0); CATEGORY: param, grad, ...
 *     free ID
 *     kernel NAME DTYPE DIM=N... [f=X,...] ID... TAG
 *     phase NAME | mark LABEL | step N [samples M]
 *     empty_cache | reset_peak_memory_stats | reset_accumulated_memory_stats
 *     segment_alloc | segment_free | segment_map | segment_unmap ADDR BYTES [STREAM]   (ADDR: 0x hex or decimal)
 *     record_stream ID STREAM | sync STREAM
 *     # a comment (also after an op)
 * IDs are words without blanks. An ID is live from its alloc to its free: a free or a kernel of an ID
 * that is not live, or an alloc of one that is, is an error naming file:line:column. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "replay/id_map.h"
#include "replay/replay.h"
#include "replay/trace_input.h"
#include "util/size.h"

#define MAX_WORDS (4 + KERNEL_MAX_DIMS + KERNEL_MAX_TENSORS + 2)

struct reader {
    const char *name;
    size_t lineno;
    struct id_map live;
    ptrdiff_t freed; /* the slot of the ID the current line frees, dropped once its op is emitted; -1: none */
    uint64_t next_key;
    bool kernel_set; /* the op holds a kernel line's call, to be cleared before the next line's */
};

static int line_error(const struct reader *r, int col, struct err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int line_error(const struct reader *r, int col, struct err *e, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set(e, ERR_INPUT, "%s:%zu:%d: %s", r->name, r->lineno, col, msg);
}

/* What ends a word: isspace() of the C locale, which oomlab runs in, and the end of the line or the
 * start of a comment. */
enum { BLANK = 1, END = 2 };
static const unsigned char char_class[256] = {
    ['\t'] = BLANK, ['\n'] = BLANK, ['\v'] = BLANK, ['\f'] = BLANK, ['\r'] = BLANK, [' '] = BLANK,
    ['\0'] = END, ['#'] = END,
};

/* The end of the word at p: eight bytes at a time, the first byte that may end it (a control byte, a
 * blank or '#') found by the borrow tricks of "Bit Twiddling Hacks" (hasless, haszero; the lowest flagged
 * byte is exact), then the table says whether it does. Reads up to seven bytes past the line's NUL, which
 * TRACE_LINE_PAD allows. */
static const char *word_end_slow(const char *p)
{
    while (!char_class[(unsigned char)*p])
        p++;
    return p;
}

static inline __attribute__((always_inline)) char *word_end(char *p)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) /* the lowest flagged byte is the first in memory */
        return (char *)word_end_slow(p);
    for (;;) {
        uint64_t x, y;
        memcpy(&x, p, 8);
        y = x ^ (ones * '#');
        uint64_t flagged = ((x - ones * 0x21) & ~x & highs) | ((y - ones) & ~y & highs);
        if (!flagged) {
            p += 8;
            continue;
        }
        p += __builtin_ctzll(flagged) / 8;
        return char_class[(unsigned char)*p] ? p : (char *)word_end_slow(p);
    }
}

/* Splits a line into words, remembering their columns and lengths; '#' starts a comment. Returns the
 * count, or max + 1 when there are more. */
static int split_words(char *line, char **words, int *cols, size_t *lens, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (char_class[(unsigned char)*p] == BLANK)
            p++;
        if (char_class[(unsigned char)*p] == END)
            return n;
        if (n == max)
            return max + 1;
        words[n] = p;
        cols[n] = (int)(p - line) + 1;
        p = word_end(p);
        lens[n] = (size_t)(p - words[n]);
        n++;
        if (*p == '#') {
            *p = '\0';
            return n;
        }
        if (*p)
            *p++ = '\0';
    }
}

/* The words of "alloc ID BYTES" written with single spaces and nothing after them (half the lines of a
 * long trace; parse_line takes "free ID" before), as split_words would give them, found without its loop;
 * 0 for any other line, left as it was for split_words. */
static inline __attribute__((always_inline)) char *common_word(char *line, char *p, char **words, int *cols, size_t *lens)
{
    if (char_class[(unsigned char)*p]) /* a blank, the end or a comment: not a word */
        return NULL;
    char *end = word_end(p);
    *words = p;
    *cols = (int)(p - line) + 1;
    *lens = (size_t)(end - p);
    return end;
}

static int split_common(char *line, char **words, int *cols, size_t *lens)
{
    if (memcmp(line, "alloc ", 6))
        return 0;
    words[0] = line;
    cols[0] = 1;
    lens[0] = 5;
    char *id_end = common_word(line, line + 6, words + 1, cols + 1, lens + 1);
    if (!id_end || *id_end != ' ')
        return 0;
    char *end = common_word(line, id_end + 1, words + 2, cols + 2, lens + 2);
    if (!end || *end)
        return 0;
    *id_end = '\0';
    line[5] = '\0';
    return 3;
}

/* A decimal integer in [0, max]. */
static bool decimal(const char *s, uint64_t max, uint64_t *out)
{
    if (!isdigit((unsigned char)*s))
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s) || v > (max - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* Up to eight decimal digits as one word, without a branch per digit (the counts' lengths vary at
 * random): the word is right-aligned with '0' before it, checked to be all digits, and combined pairwise
 * (as fast_float's parse_eight_digits_unrolled does). Reads up to seven bytes past the line's NUL, which
 * TRACE_LINE_PAD allows. false if a byte is not a digit. */
static inline __attribute__((always_inline)) bool eight_digits(const char *w, size_t len, uint64_t *out)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), zeros = ones * '0', highs = ones * 0xF0;
    uint64_t x;
    memcpy(&x, w, 8);
    if (len < 8)
        x = x << (8 * (8 - len)) | zeros >> (8 * len);
    if ((x & highs) != zeros || ((x + ones * 6) & highs) != zeros)
        return false;
    x -= zeros;
    x = (x * 10 + (x >> 8)) & UINT64_C(0x00FF00FF00FF00FF);
    x = (x * 100 + (x >> 16)) & UINT64_C(0x0000FFFF0000FFFF);
    *out = (x * 10000 + (x >> 32)) & UINT64_C(0xFFFFFFFF);
    return true;
}

/* A byte count past eight digits: plain digits (below 10^18 and so below size_parse's 2^62 limit)
 * directly, anything else through size_parse, which reads units and says what is wrong. */
static __attribute__((noinline)) int byte_count_slow(const struct reader *r, const char *w, size_t len, int col,
                                                     uint64_t *out, struct err *e)
{
    uint64_t v = 0;
    size_t i = 0;
    if (len <= 18)
        for (; i < len && w[i] >= '0' && w[i] <= '9'; i++)
            v = v * 10 + (uint64_t)(w[i] - '0');
    if (len && i == len) {
        *out = v;
        return 0;
    }
    if (size_parse(w, out, e))
        return err_prefix(e, "%s:%zu:%d: ", r->name, r->lineno, col);
    return 0;
}

/* A byte count: up to eight digits (nearly every line's) inline, the rest apart. */
static inline __attribute__((always_inline)) int byte_count(const struct reader *r, const char *w, size_t len, int col, uint64_t *out,
                             struct err *e)
{
    if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && len && len <= 8 && eight_digits(w, len, out))
        return 0;
    return byte_count_slow(r, w, len, col, out, e);
}

static __attribute__((noinline, cold)) int not_live(const struct reader *r, const char *use, const char *word, int col,
                                                     struct err *e)
{
    return line_error(r, col, e, "%s '%s', which is not live (no earlier line allocates it, or it was freed)", use,
                      word);
}

/* The live ID's key; `use` says what the line does with it ("free of", "kernel reads"). *slot (if
 * given) is where it sits, for dropping it. Inline, its error apart: a free line's whole work. */
static inline __attribute__((always_inline)) int live_of(struct reader *r, const char *use, const char *word, size_t len, int col, uint64_t *key,
                          ptrdiff_t *slot, struct err *e)
{
    ptrdiff_t at = id_map_find(&r->live, word, len, id_map_hash(word, len));
    if (at < 0)
        return not_live(r, use, word, col, e);
    *key = id_map_key(&r->live, at);
    if (slot)
        *slot = at;
    return 0;
}

static int stream_of(const struct reader *r, const char *w, int col, int32_t *stream, struct err *e)
{
    uint64_t v;
    if (!decimal(w[0] == 's' ? w + 1 : w, 1u << 30, &v))
        return line_error(r, col, e, "stream '%s' is not sN or a decimal number N", w);
    *stream = (int32_t)v;
    return 0;
}

static bool looks_like_stream(const char *w)
{
    return isdigit((unsigned char)w[w[0] == 's']);
}

static int parse_alloc(struct reader *r, char **w, const int *col, const size_t *len, int n, struct op *op,
                       struct err *e)
{
    if (n < 3 || n > 6)
        return line_error(r, col[n < 3 ? 0 : 6], e, "expected 'alloc ID BYTES [STREAM] [CATEGORY [TAG]]'");
    int added = id_map_add(&r->live, w[1], len[1], id_map_hash(w[1], len[1]), r->next_key);
    if (added < 0)
        return err_set(e, ERR_INTERNAL, "out of host memory reading %s", r->name);
    if (added > 0)
        return line_error(r, col[1], e, "'%s' is allocated again while still live", w[1]);
    op->id = r->next_key++; /* an error below ends the reading: the ID added stays unused */
    if (byte_count(r, w[2], len[2], col[2], &op->bytes, e))
        return -1;
    int at = 3;
    op->category = CAT_OTHER;
    if (at < n && looks_like_stream(w[at]) && stream_of(r, w[at], col[at], &op->stream, e))
        return -1;
    at += at < n && looks_like_stream(w[at]);
    if (at < n) {
        int c = category_from_name(w[at]);
        if (c < 0)
            return line_error(r, col[at], e, "unknown category '%s' (param, grad, optimizer_state, ema, activation, "
                              "temp, workspace, input, output, other)", w[at]);
        op->category = (uint8_t)c;
        at++;
    }
    if (at < n)
        op->name = w[at++];
    if (at < n)
        return line_error(r, col[at], e, "expected 'alloc ID BYTES [STREAM] [CATEGORY [TAG]]'");
    return 0;
}

/* "oom BYTES [STREAM] [TAG]": a request the recording OOMed on. */
static int parse_recorded_oom(struct reader *r, char **w, const int *col, const size_t *len, int n, struct op *op,
                              struct err *e)
{
    if (n < 2 || n > 4)
        return line_error(r, col[n < 2 ? 0 : 4], e, "expected 'oom BYTES [STREAM] [TAG]'");
    if (byte_count(r, w[1], len[1], col[1], &op->bytes, e))
        return -1;
    int at = 2;
    if (at < n && looks_like_stream(w[at]) && stream_of(r, w[at], col[at], &op->stream, e))
        return -1;
    at += at < n && looks_like_stream(w[at]);
    if (at < n)
        op->name = w[at++];
    return at < n ? line_error(r, col[at], e, "expected 'oom BYTES [STREAM] [TAG]'") : 0;
}

/* "f=0.1,0.9": up to four floats. */
static int parse_fparams(const struct reader *r, const char *s, int col, float *f, struct err *e)
{
    for (int i = 0; i < 4; i++) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || errno)
            return line_error(r, col, e, "kernel scalar '%s' is not a number", s);
        f[i] = (float)v;
        if (*end == '\0')
            return 0;
        if (*end != ',')
            break;
        s = end + 1;
    }
    return line_error(r, col, e, "expected f= with one to four comma-separated numbers");
}

static int parse_kernel(struct reader *r, char **w, const int *col, const size_t *len, int n, struct op *op,
                        struct err *e)
{
    if (n < 3)
        return line_error(r, col[0], e, "expected 'kernel NAME DTYPE DIM=N... ID... TAG'");
    int id = kernel_from_name(w[1]), dt = dtype_from_name(w[2]);
    if (id < 0)
        return line_error(r, col[1], e, "unknown kernel '%s' (see `oomlab list kernels`)", w[1]);
    if (dt < 0)
        return line_error(r, col[2], e, "unknown dtype '%s'", w[2]);
    const struct kernel_desc *d = kernel_get((unsigned)id);
    struct kernel_call *k = &op->kernel;
    r->kernel_set = true;
    k->kernel = (uint16_t)id;
    k->dtype = (uint8_t)dt;
    int at = 3;
    for (int i = 0; i < KERNEL_MAX_DIMS && d->dim_names[i]; i++, at++) {
        size_t dlen = strlen(d->dim_names[i]);
        uint64_t v;
        if (at >= n || strncmp(w[at], d->dim_names[i], dlen) || w[at][dlen] != '=')
            return line_error(r, col[at < n ? at : 0], e, "%s: expected %s=N", d->name, d->dim_names[i]);
        if (!decimal(w[at] + dlen + 1, INT64_MAX, &v))
            return line_error(r, col[at], e, "%s: %s is not a decimal number", d->name, w[at]);
        k->dims[i] = (int64_t)v;
    }
    if (at < n && !strncmp(w[at], "f=", 2) && parse_fparams(r, w[at] + 2, col[at], k->fparam, e))
        return -1;
    at += at < n && !strncmp(w[at], "f=", 2);
    if (n - at != d->ntensors + 1)
        return line_error(r, col[at < n ? at : 0], e, "%s: expected %u tensor IDs and a tag", d->name,
                          (unsigned)d->ntensors);
    k->ntensors = d->ntensors;
    for (unsigned i = 0; i < d->ntensors; i++, at++)
        if (live_of(r, "kernel names", w[at], len[at], col[at], &k->tensors[i], NULL, e))
            return -1;
    op->name = w[at];
    if (kernel_validate(k, e))
        return err_prefix(e, "%s:%zu:%d: ", r->name, r->lineno, col[0]);
    return 0;
}

static int parse_segment(const struct reader *r, char **w, const int *col, const size_t *len, int n, struct op *op,
                         struct err *e)
{
    if (n < 3 || n > 4)
        return line_error(r, col[n < 3 ? 0 : 4], e, "expected '%s ADDRESS BYTES [STREAM]'", w[0]);
    char *end;
    errno = 0;
    op->id = strtoull(w[1], &end, !strncmp(w[1], "0x", 2) ? 16 : 10);
    if (*end || errno || w[1][0] == '-')
        return line_error(r, col[1], e, "address '%s' is not 0x-hex or decimal", w[1]);
    if (byte_count(r, w[2], len[2], col[2], &op->bytes, e))
        return -1;
    return n == 4 ? stream_of(r, w[3], col[3], &op->stream, e) : 0;
}

/* The op of a line of this kind, cleared: the previous line's, its kernel call only after a kernel line
 * (zeroing the whole op for every line shows in a long trace's time). */
static inline void start_op(struct reader *r, struct op *op, int kind)
{
    memset(op, 0, offsetof(struct op, kernel));
    if (r->kernel_set) {
        memset(&op->kernel, 0, sizeof op->kernel);
        r->kernel_set = false;
    }
    op->kind = (enum op_kind)kind;
    op->where = r->lineno;
}

static int parse_line(struct reader *r, char *line, struct op *op, struct err *e)
{
    /* "free ID", single-spaced with nothing after it (half the lines of a long trace), without the words */
    if (!memcmp(line, "free ", 5) && !char_class[(unsigned char)line[5]]) {
        char *end = word_end(line + 5);
        if (!*end) {
            start_op(r, op, OP_FREE);
            return live_of(r, "free of", line + 5, (size_t)(end - line - 5), 6, &op->id, &r->freed, e);
        }
    }
    char *w[MAX_WORDS];
    int col[MAX_WORDS];
    size_t len[MAX_WORDS];
    int n = split_common(line, w, col, len);
    if (!n)
        n = split_words(line, w, col, len, MAX_WORDS);
    op->kind = OP_KIND_COUNT; /* nothing to emit */
    if (n == 0)
        return 0;
    if (n > MAX_WORDS)
        return line_error(r, 1, e, "more than %d words", MAX_WORDS);
    /* the verbs of nearly every line first, then the table */
    int kind = len[0] == 5 && !memcmp(w[0], "alloc", 5) ? OP_ALLOC
               : len[0] == 4 && !memcmp(w[0], "free", 4) ? OP_FREE
                                                         : op_kind_from_name(w[0]);
    start_op(r, op, kind);
    switch (kind) {
    case OP_ALLOC:
    case OP_MANAGED_ALLOC: return parse_alloc(r, w, col, len, n, op, e);
    case OP_KERNEL: return parse_kernel(r, w, col, len, n, op, e);
    case OP_SEGMENT_ALLOC:
    case OP_SEGMENT_FREE:
    case OP_SEGMENT_MAP:
    case OP_SEGMENT_UNMAP: return parse_segment(r, w, col, len, n, op, e);
    case OP_RECORDED_OOM: return parse_recorded_oom(r, w, col, len, n, op, e);
    case OP_FREE:
        if (n != 2)
            return line_error(r, col[n < 2 ? 0 : 2], e, "expected 'free ID'");
        return live_of(r, "free of", w[1], len[1], col[1], &op->id, &r->freed, e);
    case OP_PHASE:
    case OP_MARK:
        if (n != 2)
            return line_error(r, col[n < 2 ? 0 : 2], e, "expected '%s NAME'", w[0]);
        op->name = w[1];
        return 0;
    case OP_STEP:
        if ((n != 2 && n != 4) || (n == 4 && strcmp(w[2], "samples")) || !decimal(w[1], INT64_MAX, &op->id) ||
            (n == 4 && !decimal(w[3], INT64_MAX, &op->bytes)))
            return line_error(r, col[0], e, "expected 'step N [samples M]' with decimal N and M");
        return 0;
    case OP_RECORD_STREAM: {
        if (n != 3)
            return line_error(r, col[n < 3 ? 0 : 3], e, "expected 'record_stream ID STREAM'");
        if (live_of(r, "record_stream of", w[1], len[1], col[1], &op->id, NULL, e))
            return -1;
        return stream_of(r, w[2], col[2], &op->stream, e);
    }
    case OP_SYNC:
        if (n != 2)
            return line_error(r, col[n < 2 ? 0 : 2], e, "expected 'sync STREAM'");
        return stream_of(r, w[1], col[1], &op->stream, e);
    case OP_EMPTY_CACHE:
    case OP_RESET_PEAK:
    case OP_RESET_ACCUMULATED:
        return n == 1 ? 0 : line_error(r, col[1], e, "'%s' takes nothing after it", w[0]);
    }
    return line_error(r, col[0], e,
                      "unknown verb '%s' (expected alloc, free, kernel, phase, step, mark, empty_cache, "
                      "reset_peak_memory_stats, reset_accumulated_memory_stats, segment_alloc, segment_free, segment_map, "
                      "segment_unmap, managed_alloc, record_stream or sync)",
                      w[0]);
}

int text_trace_run(struct trace_input *in, struct op_sink *sink, struct err *e)
{
    struct reader r = {.name = trace_input_name(in), .freed = -1, .next_key = 1};
    int rc = 0;
    struct op op = {0}; /* each line's, cleared by parse_line */
    for (;;) {
        char *line;
        if ((rc = trace_input_line(in, &line, &r.lineno, e)) || !line)
            break;
        if ((rc = parse_line(&r, line, &op, e)))
            break;
        if (op.kind == OP_KIND_COUNT) /* a blank or comment line */
            continue;
        if ((rc = sink->emit(sink, &op, e)))
            break;
        if (r.freed >= 0) {
            id_map_remove(&r.live, r.freed);
            r.freed = -1;
        }
    }
    id_map_free(&r.live);
    return rc;
}
