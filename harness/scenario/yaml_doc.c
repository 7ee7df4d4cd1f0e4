/* yaml_doc.c: loading one YAML file into a libyaml document and positioning errors in it. libyaml's
 * scanner spends time proportional to the nesting depth on every token, so a deeply nested file is
 * quadratic: a first pass over the parse events refuses nesting past YAML_DOC_MAX_DEPTH before the
 * document is built, stopping as soon as the limit is crossed. */
#include "scenario/yaml_doc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


static int read_whole_file(const char *path, unsigned char **buf, size_t *len, struct err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return err_set(e, ERR_INPUT, "%s: not a regular file", path);
    }
    if ((unsigned long long)st.st_size > YAML_DOC_MAX_BYTES) {
        fclose(f);
        return err_set(e, ERR_INPUT, "%s: too large for a scenario (%lld bytes, limit %u)", path,
                       (long long)st.st_size, YAML_DOC_MAX_BYTES);
    }
    *buf = malloc((size_t)st.st_size + 1);
    if (!*buf) {
        fclose(f);
        return err_set(e, ERR_INTERNAL, "%s: out of memory reading the file", path);
    }
    *len = fread(*buf, 1, (size_t)st.st_size, f);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(*buf);
        return err_set(e, ERR_INPUT, "%s: cannot read: %s", path, strerror(errno));
    }
    return 0;
}

/* Reader errors (bad UTF-8, control characters) carry a byte offset, not a mark. */
static void offset_to_line_col(const unsigned char *buf, size_t len, size_t offset, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < offset && i < len; i++) {
        if (buf[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int parser_error(const char *path, const yaml_parser_t *p, const unsigned char *buf, size_t len,
                        struct err *e)
{
    const char *problem = p->problem ? p->problem : "unknown problem";
    switch (p->error) {
    case YAML_MEMORY_ERROR:
        return err_set(e, ERR_INTERNAL, "%s: out of memory while parsing", path);
    case YAML_READER_ERROR: {
        size_t line, col;
        offset_to_line_col(buf, len, p->problem_offset, &line, &col);
        return err_set(e, ERR_INPUT, "%s:%zu:%zu: invalid input: %s", path, line, col, problem);
    }
    default:
        if (p->context)
            return err_set(e, ERR_INPUT, "%s:%zu:%zu: YAML syntax error: %s (%s at line %zu)", path,
                           p->problem_mark.line + 1, p->problem_mark.column + 1, problem, p->context,
                           p->context_mark.line + 1);
        return err_set(e, ERR_INPUT, "%s:%zu:%zu: YAML syntax error: %s", path, p->problem_mark.line + 1,
                       p->problem_mark.column + 1, problem);
    }
}

/* The first collection nested deeper than YAML_DOC_MAX_DEPTH is an error at its position. Syntax errors
 * are left to the load that follows, which meets them at the same place. */
static int check_depth(const char *path, const unsigned char *buf, size_t len, struct err *e)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return err_set(e, ERR_INTERNAL, "%s: cannot initialise the YAML parser", path);
    yaml_parser_set_input_string(&p, buf, len);
    int depth = 0, rc = 0;
    for (bool done = false; !done && rc == 0;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev))
            break;
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > YAML_DOC_MAX_DEPTH)
                rc = err_set(e, ERR_INPUT, "%s:%zu:%zu: nested deeper than %d levels, the most a scenario file may",
                             path, ev.start_mark.line + 1, ev.start_mark.column + 1, YAML_DOC_MAX_DEPTH);
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* A string with a NUL (written "\0" or "\x00" in a double-quoted scalar) would be cut short by every
 * reader of the text: refused at its position. */
static int reject_nul(struct yaml_doc *d, struct err *e)
{
    for (yaml_node_t *n = d->doc.nodes.start; n < d->doc.nodes.top; n++)
        if (n->type == YAML_SCALAR_NODE && strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
            return yaml_doc_error(d, n, e, "a string holds a NUL character (\\0); scenario strings cannot contain one");
    return 0;
}

/* A second document in the stream is rejected: one file describes one scenario. */
static int reject_second_document(const char *path, yaml_parser_t *p, const unsigned char *buf, size_t len,
                                  struct err *e)
{
    yaml_document_t next;
    if (!yaml_parser_load(p, &next))
        return parser_error(path, p, buf, len, e);
    yaml_node_t *root = yaml_document_get_root_node(&next);
    int rc = 0;
    if (root)
        rc = err_set(e, ERR_INPUT, "%s:%zu:%zu: a second YAML document; a scenario file holds exactly one", path,
                     next.start_mark.line + 1, next.start_mark.column + 1);
    yaml_document_delete(&next);
    return rc;
}

int yaml_doc_load(struct yaml_doc *d, const char *path, struct err *e)
{
    memset(d, 0, sizeof *d);
    if (strlen(path) >= sizeof d->path)
        return err_set(e, ERR_INPUT, "%.64s...: path too long", path);
    snprintf(d->path, sizeof d->path, "%s", path);

    unsigned char *buf = NULL;
    size_t len = 0;
    if (read_whole_file(path, &buf, &len, e))
        return -1;
    if (check_depth(path, buf, len, e)) {
        free(buf);
        return -1;
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        free(buf);
        return err_set(e, ERR_INTERNAL, "%s: cannot initialise the YAML parser", path);
    }
    yaml_parser_set_input_string(&parser, buf, len);
    int rc = 0;
    if (!yaml_parser_load(&parser, &d->doc)) {
        rc = parser_error(path, &parser, buf, len, e);
    } else if (!yaml_document_get_root_node(&d->doc)) {
        rc = err_set(e, ERR_INPUT, "%s:1:1: empty file: a scenario is a mapping of keys (name, model, job, ...)",
                     path);
        yaml_document_delete(&d->doc);
    } else if (reject_second_document(path, &parser, buf, len, e) || reject_nul(d, e)) {
        rc = -1;
        yaml_document_delete(&d->doc);
    }
    yaml_parser_delete(&parser);
    free(buf);
    return rc;
}

void yaml_doc_free(struct yaml_doc *d)
{
    yaml_document_delete(&d->doc);
}

yaml_node_t *yaml_doc_root(struct yaml_doc *d)
{
    return yaml_document_get_root_node(&d->doc);
}

yaml_node_t *yaml_doc_node(struct yaml_doc *d, int index)
{
    return yaml_document_get_node(&d->doc, index);
}

yaml_node_t *yaml_mapping_get(struct yaml_doc *d, yaml_node_t *m, const char *key, yaml_node_t **key_node)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_doc_node(d, p->key);
        if (k->type == YAML_SCALAR_NODE && !strcmp(yaml_scalar_text(k), key)) {
            if (key_node)
                *key_node = k;
            return yaml_doc_node(d, p->value);
        }
    }
    return NULL;
}

yaml_node_t *yaml_mapping_earlier(struct yaml_doc *d, yaml_node_t *m, const yaml_node_pair_t *upto, const char *key)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < upto; p++) {
        yaml_node_t *k = yaml_doc_node(d, p->key);
        if (k->type == YAML_SCALAR_NODE && !strcmp(yaml_scalar_text(k), key))
            return k;
    }
    return NULL;
}

int yaml_doc_error(const struct yaml_doc *d, const yaml_node_t *at, struct err *e, const char *fmt, ...)
{
    char msg[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_set(e, ERR_INPUT, "%s:%zu:%zu: %s", d->path, at->start_mark.line + 1, at->start_mark.column + 1,
                   msg);
}

const char *yaml_scalar_text(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int yaml_is_quoted(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && (n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                                           n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE);
}

int yaml_is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = yaml_scalar_text(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

const char *yaml_node_describe(const yaml_node_t *n, char *buf, size_t len)
{
    if (n->type == YAML_SEQUENCE_NODE)
        snprintf(buf, len, "a list");
    else if (n->type == YAML_MAPPING_NODE)
        snprintf(buf, len, "a mapping");
    else if (yaml_is_null(n))
        snprintf(buf, len, "nothing");
    else if (strlen(yaml_scalar_text(n)) > 60)
        snprintf(buf, len, "'%.57s...'", yaml_scalar_text(n));
    else
        snprintf(buf, len, "'%s'", yaml_scalar_text(n));
    return buf;
}
