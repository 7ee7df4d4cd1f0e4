/* trace_input.c: a replay's input read once through zlib (see trace_input.h). */
#include "replay/trace_input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define BUF_SIZE (4 * TRACE_MAX_LINE)
#define NO_NUL SIZE_MAX

struct trace_input {
    struct trace_lines lb; /* first, for trace_input_line's inline part; buf: BUF_SIZE bytes plus a NUL and
                            * TRACE_LINE_PAD */
    gzFile gz;
    int fd;
    off_t size;           /* a regular file's size, else -1 */
    char name[4096];
    bool eof;
    bool gz_used;         /* something was read through zlib */
    unsigned char head[2]; /* a regular file's first bytes, read without zlib */
    size_t nhead;
    unsigned char *all;   /* what trace_input_read_all returned: a copy, or (mapped) the file mapped */
    size_t all_len;
    bool mapped;
};

static int gz_error(struct trace_input *in, struct err *e)
{
    int code;
    const char *msg = gzerror(in->gz, &code);
    if (code == Z_ERRNO)
        return err_set(e, ERR_INPUT, "%s: cannot read: %s", in->name, strerror(errno));
    return err_set(e, ERR_INPUT, "%s: not a readable gzip stream: %s", in->name, msg);
}

struct trace_input *trace_input_open(const char *path, struct err *e)
{
    bool std_in = !strcmp(path, "-");
    int fd = std_in ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(e, ERR_INPUT, "%s: cannot open: %s", std_in ? "standard input" : path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        err_set(e, ERR_INPUT, "%s: is a directory, not a trace or snapshot file", path);
        return NULL;
    }
    struct trace_input *in = calloc(1, sizeof *in);
    if (!in || !(in->lb.buf = calloc(1, BUF_SIZE + 1 + TRACE_LINE_PAD))) {
        free(in);
        close(fd);
        err_set(e, ERR_INTERNAL, "out of host memory opening %s", path);
        return NULL;
    }
    snprintf(in->name, sizeof in->name, "%s", std_in ? "standard input" : path);
    in->lb.nul = NO_NUL;
    in->fd = fd;
    in->size = S_ISREG(st.st_mode) ? st.st_size : -1;
    if (!(in->gz = gzdopen(fd, "rb"))) {
        close(fd);
        free(in->lb.buf);
        free(in);
        err_set(e, ERR_INTERNAL, "out of host memory opening %s", path);
        return NULL;
    }
    /* zlib reads a plain file straight into a request of twice this or more, as fill's are (BUF_SIZE) */
    gzbuffer(in->gz, BUF_SIZE / 4);
    if (in->size > 0) { /* a plain snapshot is then mapped without zlib's buffers ever being filled */
        ssize_t n = pread(fd, in->head, sizeof in->head, 0);
        in->nhead = n > 0 ? (size_t)n : 0;
    }
    return in;
}

void trace_input_close(struct trace_input *in)
{
    if (!in)
        return;
    gzclose(in->gz);
    if (in->mapped)
        munmap(in->all, in->all_len);
    else
        free(in->all);
    free(in->lb.buf);
    free(in);
}

const char *trace_input_name(const struct trace_input *in)
{
    return in->name;
}

/* Reads more bytes after buf[end), noting the first NUL byte among them (once per read rather than a
 * search per line); 0 (possibly at EOF) or -1. */
static int fill(struct trace_input *in, struct err *e)
{
    in->gz_used = true;
    if (in->lb.start > 0) {
        memmove(in->lb.buf, in->lb.buf + in->lb.start, in->lb.end - in->lb.start);
        if (in->lb.nul != NO_NUL)
            in->lb.nul -= in->lb.start;
        in->lb.end -= in->lb.start;
        in->lb.start = 0;
    }
    while (!in->eof && in->lb.end < BUF_SIZE) {
        int n = gzread(in->gz, in->lb.buf + in->lb.end, (unsigned)(BUF_SIZE - in->lb.end));
        if (n < 0)
            return gz_error(in, e);
        if (n == 0)
            in->eof = true;
        const char *nul = in->lb.nul == NO_NUL ? memchr(in->lb.buf + in->lb.end, '\0', (size_t)n) : NULL;
        if (nul)
            in->lb.nul = (size_t)(nul - in->lb.buf);
        in->lb.end += (size_t)n;
        if (n > 0)
            break;
    }
    return 0;
}

/* Whether zlib would copy the file as it is: it does not start with gzip's magic bytes (zlib's gz_look). */
static bool plain_file(const struct trace_input *in)
{
    return in->nhead == sizeof in->head && !(in->head[0] == 0x1f && in->head[1] == 0x8b);
}

int trace_input_peek(struct trace_input *in, struct err *e)
{
    if (!in->gz_used && plain_file(in))
        return in->head[0];
    if (in->lb.start == in->lb.end && fill(in, e))
        return -2;
    return in->lb.start < in->lb.end ? (unsigned char)in->lb.buf[in->lb.start] : -1;
}

/* An uncompressed regular file is mapped rather than copied: the bytes from the file's read position on.
 * 0 with *data NULL when it cannot be (compressed, a pipe, an empty rest). */
static int map_rest(struct trace_input *in, const unsigned char **data, size_t *len)
{
    *data = NULL;
    /* zlib's verdict and position, or the file's head when nothing went through zlib yet */
    bool direct = in->gz_used ? gzdirect(in->gz) : plain_file(in);
    z_off_t delivered = in->gz_used ? gztell(in->gz) : 0;
    if (in->size <= 0 || !direct || delivered < 0 || (uint64_t)in->size > TRACE_MAX_PICKLE)
        return 0;
    off_t from = (off_t)delivered - (off_t)(in->lb.end - in->lb.start);
    if (from < 0 || from >= in->size)
        return 0;
    void *m = mmap(NULL, (size_t)in->size, PROT_READ, MAP_PRIVATE, in->fd, 0);
    if (m == MAP_FAILED)
        return 0;
    madvise(m, (size_t)in->size, MADV_SEQUENTIAL);
    in->all = m;
    in->all_len = (size_t)in->size;
    in->mapped = true;
    in->lb.start = in->lb.end;
    in->eof = true;
    *data = in->all + from;
    *len = (size_t)(in->size - from);
    return 0;
}

int trace_input_read_all(struct trace_input *in, const unsigned char **data, size_t *len, struct err *e)
{
    if (map_rest(in, data, len), *data)
        return 0;
    size_t cap = 1 << 20, n = in->lb.end - in->lb.start;
    unsigned char *out = malloc(cap > n ? cap : n);
    if (!out)
        return err_set(e, ERR_INTERNAL, "out of host memory reading %s", in->name);
    if (n > cap)
        cap = n;
    memcpy(out, in->lb.buf + in->lb.start, n);
    in->lb.start = in->lb.end;
    for (;;) {
        if (n == cap) {
            if (cap >= TRACE_MAX_PICKLE) {
                free(out);
                return err_set(e, ERR_INPUT, "%s: larger than %llu MiB, the largest snapshot oomlab reads", in->name,
                               TRACE_MAX_PICKLE >> 20);
            }
            unsigned char *grown = realloc(out, cap * 2);
            if (!grown) {
                free(out);
                return err_set(e, ERR_INTERNAL, "out of host memory reading %s", in->name);
            }
            out = grown;
            cap *= 2;
        }
        unsigned want = cap - n > (1u << 30) ? 1u << 30 : (unsigned)(cap - n);
        int got = gzread(in->gz, out + n, want);
        if (got < 0) {
            free(out);
            return gz_error(in, e);
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    in->eof = true;
    in->all = out;
    *data = out;
    *len = n;
    return 0;
}

int trace_input_line_slow(struct trace_input *in, char **line, size_t *lineno, char *nl, struct err *e)
{
    *line = NULL;
    while (!nl && !in->eof && in->lb.end - in->lb.start < TRACE_MAX_LINE) {
        size_t seen = in->lb.end - in->lb.start;
        if (fill(in, e))
            return -1;
        nl = memchr(in->lb.buf + in->lb.start + seen, '\n', in->lb.end - in->lb.start - seen);
    }
    size_t avail = in->lb.end - in->lb.start;
    if (!nl && avail == 0)
        return 0;
    size_t len = nl ? (size_t)(nl - (in->lb.buf + in->lb.start)) : avail;
    if (len >= TRACE_MAX_LINE || in->lb.nul < in->lb.start + len) /* an error ends the reading: no line passes a NUL */
        *lineno = ++in->lb.lineno;
    if (len >= TRACE_MAX_LINE)
        return err_set(e, ERR_INPUT, "%s:%zu: longer than %d bytes, the longest line oomlab reads", in->name,
                       *lineno, TRACE_MAX_LINE - 1);
    if (in->lb.nul < in->lb.start + len)
        return err_set(e, ERR_INPUT, "%s:%zu:%zu: a NUL byte; a trace is text", in->name, *lineno,
                       in->lb.nul - in->lb.start + 1);
    *line = trace_take_line(&in->lb, len, nl, lineno);
    return 0;
}
