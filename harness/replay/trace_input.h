/* trace_input.h: the file a replay reads, opened once: a path or "-" (standard input, a pipe), plain
 * or gzip-compressed (read through zlib either way), so its kind can be told from its first bytes
 * without reading it twice, and a text trace can be read line by line in constant memory. */
#ifndef OOMLAB_TRACE_INPUT_H
#define OOMLAB_TRACE_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "util/err.h"

#define TRACE_MAX_LINE (64 * 1024)         /* longest text-trace line, newline included */
#define TRACE_MAX_PICKLE (2048ULL << 20)   /* largest snapshot read into memory: 2 GiB (README Limits) */

struct trace_input;

/* Opens path ("-" = standard input). A directory, a missing or unreadable file: ERR_INPUT naming it. */
struct trace_input *trace_input_open(const char *path, struct err *e);
void trace_input_close(struct trace_input *in);
const char *trace_input_name(const struct trace_input *in); /* the path, or "standard input" */

/* The first byte of the (decompressed) content without consuming it; -1 if the input is empty. */
int trace_input_peek(struct trace_input *in, struct err *e);
/* The whole remaining content, valid until trace_input_close (an uncompressed file is mapped, not copied);
 * ERR_INPUT past TRACE_MAX_PICKLE. Call it once. */
int trace_input_read_all(struct trace_input *in, const unsigned char **data, size_t *len, struct err *e);
/* The next line without its newline, NUL-terminated, valid until the next call; *line NULL at the end.
 * TRACE_LINE_PAD bytes after the NUL can be read (initialised, any value), so the line can be scanned a
 * word at a time. A line longer than TRACE_MAX_LINE or holding a NUL byte is an error naming its line
 * and column. */
#define TRACE_LINE_PAD 8

/* The line buffer, the first member of struct trace_input, shown here so that trace_input_line's common
 * case (a newline in the buffer, no NUL before it) is inline: it runs for every line of a long trace. */
struct trace_lines {
    char *buf;
    size_t start, end; /* unread bytes are buf[start, end) */
    size_t nul;        /* where in buf the first NUL byte read sits; SIZE_MAX if none (a line stops at one) */
    size_t lineno;
};

/* The line at buf[start], cut at the newline (or the buffer's end) where given: NUL-terminated, a final
 * '\r' dropped. */
static inline char *trace_take_line(struct trace_lines *b, size_t len, bool nl, size_t *lineno)
{
    char *s = b->buf + b->start;
    *lineno = ++b->lineno;
    s[len] = '\0'; /* the newline's place, or the spare byte after the buffer */
    if (len && s[len - 1] == '\r')
        s[len - 1] = '\0';
    b->start += nl ? len + 1 : len;
    return s;
}

/* trace_input_line past the buffer's newlines: filling it, the last line, and the errors. */
int trace_input_line_slow(struct trace_input *in, char **line, size_t *lineno, char *nl, struct err *e);

static inline int trace_input_line(struct trace_input *in, char **line, size_t *lineno, struct err *e)
{
    struct trace_lines *b = (struct trace_lines *)in;
    char *s = b->buf + b->start, *nl = memchr(s, '\n', b->end - b->start);
    size_t len = nl ? (size_t)(nl - s) : 0;
    if (!nl || len >= TRACE_MAX_LINE || b->nul < b->start + len)
        return trace_input_line_slow(in, line, lineno, nl, e);
    *line = trace_take_line(b, len, true, lineno);
    return 0;
}

#endif
