/* keytable.c: filling a struct from a YAML mapping by a key table, with typed, range-checked setters. */
#include "scenario/keytable.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "scenario/suggest.h"
#include "util/size.h"

const char *keytable_path(const char *where, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", where, *where ? "." : "", name);
    return buf;
}

int keytable_expect_mapping(const struct key_ctx *c, yaml_node_t *n, const char *path, struct err *e)
{
    if (n->type == YAML_MAPPING_NODE)
        return 0;
    char got[96];
    return yaml_doc_error(c->doc, n, e, "%s must be a mapping, got %s", path, yaml_node_describe(n, got, sizeof got));
}

/* "got 'eight'", or "got '8' (quoted, so a string)" where a number was expected. */
static const char *describe_for_number(const yaml_node_t *n, char *buf, size_t len)
{
    char what[96];
    yaml_node_describe(n, what, sizeof what);
    snprintf(buf, len, "%s%s", what, yaml_is_quoted(n) ? " (quoted, so a string)" : "");
    return buf;
}

static int plain_scalar(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && !yaml_is_quoted(n) && !yaml_is_null(n);
}

/* "from 0 to 64", "at least 1", "between 0 and 1 (not 0 or 1 itself)": the bounds of a number key. */
static const char *bounds_text(const struct key *k, char *buf, size_t len)
{
    if (k->type == KEY_FLOAT && k->fopen)
        snprintf(buf, len, "between %g and %g (not %g or %g itself)", k->fmin, k->fmax, k->fmin, k->fmax);
    else if (k->type == KEY_FLOAT)
        snprintf(buf, len, "from %g to %g", k->fmin, k->fmax);
    else if (k->imax == LLONG_MAX)
        snprintf(buf, len, "at least %lld", k->imin);
    else
        snprintf(buf, len, "from %lld to %lld", k->imin, k->imax);
    return buf;
}

static bool float_in_bounds(const struct key *k, double x)
{
    return k->fopen ? x > k->fmin && x < k->fmax : x >= k->fmin && x <= k->fmax;
}

long long keytable_read_integer(const void *field, size_t size, bool is_signed)
{
    int8_t s1;
    uint8_t u1;
    int16_t s2;
    uint16_t u2;
    int32_t s4;
    uint32_t u4;
    int64_t s8;
    switch (size) {
    case 1:
        memcpy(&s1, field, 1);
        memcpy(&u1, field, 1);
        return is_signed ? (long long)s1 : (long long)u1;
    case 2:
        memcpy(&s2, field, 2);
        memcpy(&u2, field, 2);
        return is_signed ? (long long)s2 : (long long)u2;
    case 4:
        memcpy(&s4, field, 4);
        memcpy(&u4, field, 4);
        return is_signed ? (long long)s4 : (long long)u4;
    default:
        memcpy(&s8, field, 8);
        return s8;
    }
}

double keytable_read_float(const struct key *k, const void *field)
{
    if (k->size == sizeof(float)) {
        float f;
        memcpy(&f, field, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, field, sizeof d);
    return d;
}

int keytable_check_values(const struct key_table *t, const void *obj, const char *where, struct err *e)
{
    char path[256], bounds[128];
    for (size_t i = 0; i < t->nkeys; i++) {
        const struct key *k = &t->keys[i];
        const void *field = (const char *)obj + k->offset;
        keytable_path(where, k->name, path, sizeof path);
        if (k->type == KEY_INT || k->type == KEY_UINT) {
            long long v = keytable_read_integer(field, k->size, k->type == KEY_INT);
            if (v < k->imin || v > k->imax)
                return err_set(e, ERR_INPUT, "%s must be %s, got %lld", path, bounds_text(k, bounds, sizeof bounds), v);
        } else if (k->type == KEY_ENUM) {
            long long v = keytable_read_integer(field, k->size, true);
            if (v < 0 || v >= k->nnames)
                return err_set(e, ERR_INPUT, "%s must be one of its %d names, got the value %lld", path, k->nnames, v);
        } else if (k->type == KEY_FLOAT) {
            double v = keytable_read_float(k, field);
            if (!float_in_bounds(k, v))
                return err_set(e, ERR_INPUT, "%s must be %s, got %g", path, bounds_text(k, bounds, sizeof bounds), v);
        }
    }
    return 0;
}

static void store_integer(void *field, size_t size, long long v)
{
    switch (size) {
    case 1: { int8_t x = (int8_t)v; memcpy(field, &x, 1); break; }
    case 2: { int16_t x = (int16_t)v; memcpy(field, &x, 2); break; }
    case 4: { int32_t x = (int32_t)v; memcpy(field, &x, 4); break; }
    default: { int64_t x = (int64_t)v; memcpy(field, &x, 8); break; }
    }
}

static int set_integer(const struct key_ctx *c, const struct key *k, const char *path, yaml_node_t *v, void *field,
                       struct err *e)
{
    char got[128];
    const char *s = yaml_scalar_text(v);
    char *end = NULL;
    long long x = 0;
    if (plain_scalar(v)) {
        errno = 0;
        x = strtoll(s, &end, 10);
    }
    if (!end || end == s || *end) {
        return yaml_doc_error(c->doc, v, e, "%s must be an integer, got %s", path,
                              describe_for_number(v, got, sizeof got));
    }
    if (errno == ERANGE || x < k->imin || x > k->imax)
        return yaml_doc_error(c->doc, v, e, "%s must be %s, got %s", path, bounds_text(k, got, sizeof got), s);
    store_integer(field, k->size, x);
    return 0;
}

static int set_float(const struct key_ctx *c, const struct key *k, const char *path, yaml_node_t *v, void *field,
                     struct err *e)
{
    char got[128];
    const char *s = yaml_scalar_text(v);
    char *end = NULL;
    double x = 0;
    if (plain_scalar(v)) {
        errno = 0;
        x = strtod(s, &end);
    }
    if (!end || end == s || *end || !isfinite(x))
        return yaml_doc_error(c->doc, v, e, "%s must be a number, got %s", path, describe_for_number(v, got, sizeof got));
    if (!float_in_bounds(k, x))
        return yaml_doc_error(c->doc, v, e, "%s must be %s, got %s", path, bounds_text(k, got, sizeof got), s);
    if (k->size == sizeof(float)) {
        float f = (float)x;
        memcpy(field, &f, sizeof f);
    } else {
        memcpy(field, &x, sizeof x);
    }
    return 0;
}

static int set_size(const struct key_ctx *c, const char *path, yaml_node_t *v, void *field, struct err *e)
{
    char got[96];
    if (v->type != YAML_SCALAR_NODE || yaml_is_null(v))
        return yaml_doc_error(c->doc, v, e, "%s must be a size like 30GiB or 512MiB, got %s", path,
                              yaml_node_describe(v, got, sizeof got));
    struct err why = {0};
    uint64_t bytes;
    if (size_parse(yaml_scalar_text(v), &bytes, &why))
        return yaml_doc_error(c->doc, v, e, "%s: %s", path, why.msg);
    memcpy(field, &bytes, sizeof bytes);
    return 0;
}

static int set_bool(const struct key_ctx *c, const char *path, yaml_node_t *v, void *field, struct err *e)
{
    char got[128];
    const char *s = plain_scalar(v) ? yaml_scalar_text(v) : "";
    bool b;
    if (!strcasecmp(s, "true"))
        b = true;
    else if (!strcasecmp(s, "false"))
        b = false;
    else
        return yaml_doc_error(c->doc, v, e, "%s must be true or false, got %s", path,
                              describe_for_number(v, got, sizeof got));
    memcpy(field, &b, sizeof b);
    return 0;
}

/* "a, b or c" into buf. */
static void join_names(const char *const *names, size_t n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && used < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        int w = snprintf(buf + used, len - used, "%s%s", sep, names[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static int find_name(const char *s, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] && !strcmp(s, names[i]))
            return (int)i;
    return -1;
}

/* The allowed values of an enum key, from its name function. */
static size_t enum_names(const struct key *k, const char **names, size_t max)
{
    size_t n = 0;
    for (int i = 0; i < k->nnames && n < max; i++)
        names[n++] = k->name_of(i);
    return n;
}

static int set_enum(const struct key_ctx *c, const struct key *k, const char *path, yaml_node_t *v, void *field,
                    struct err *e)
{
    char got[96], allowed[512];
    const char *names[64];
    size_t n = enum_names(k, names, 64);
    int idx = v->type == YAML_SCALAR_NODE ? find_name(yaml_scalar_text(v), names, n) : -1;
    if (idx < 0) {
        join_names(names, n, allowed, sizeof allowed);
        const char *near = v->type == YAML_SCALAR_NODE ? suggest_from_names(yaml_scalar_text(v), names, n) : NULL;
        if (near)
            return yaml_doc_error(c->doc, v, e, "%s must be %s, got %s (did you mean '%s'?)", path, allowed,
                                  yaml_node_describe(v, got, sizeof got), near);
        return yaml_doc_error(c->doc, v, e, "%s must be %s, got %s", path, allowed,
                              yaml_node_describe(v, got, sizeof got));
    }
    store_integer(field, k->size, idx);
    return 0;
}

static int set_string(const struct key_ctx *c, const struct key *k, const char *path, yaml_node_t *v, void *field,
                      struct err *e)
{
    char got[96];
    if (v->type != YAML_SCALAR_NODE)
        return yaml_doc_error(c->doc, v, e, "%s must be a string, got %s", path, yaml_node_describe(v, got, sizeof got));
    const char *s = yaml_is_null(v) ? "" : yaml_scalar_text(v);
    if (strlen(s) >= k->size)
        return yaml_doc_error(c->doc, v, e, "%s is longer than %zu characters", path, k->size - 1);
    memcpy(field, s, strlen(s) + 1);
    return 0;
}

int keytable_read_names(const struct key_ctx *c, yaml_node_t *list, const char *path, const char *what,
                        const char *const *names, size_t nnames, int *idx, size_t max, size_t *n, struct err *e)
{
    char got[96];
    if (list->type != YAML_SEQUENCE_NODE)
        return yaml_doc_error(c->doc, list, e, "%s must be a list of %s names, got %s", path, what,
                              yaml_node_describe(list, got, sizeof got));
    *n = 0;
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_doc_node(c->doc, *it);
        if (item->type != YAML_SCALAR_NODE || yaml_is_null(item))
            return yaml_doc_error(c->doc, item, e, "%s must list %s names, got %s", path, what,
                                  yaml_node_describe(item, got, sizeof got));
        const char *s = yaml_scalar_text(item);
        int i = find_name(s, names, nnames);
        if (i < 0) {
            const char *near = suggest_from_names(s, names, nnames);
            if (near)
                return yaml_doc_error(c->doc, item, e, "unknown %s '%s' in %s (did you mean '%s'?)", what, s, path,
                                      near);
            char known[640];
            join_names(names, nnames, known, sizeof known);
            return yaml_doc_error(c->doc, item, e, "unknown %s '%s' in %s (known: %s)", what, s, path, known);
        }
        for (size_t j = 0; j < *n; j++)
            if (idx[j] == i)
                return yaml_doc_error(c->doc, item, e, "%s '%s' is listed twice in %s", what, s, path);
        if (*n == max)
            return yaml_doc_error(c->doc, item, e, "%s lists more than %zu %s names", path, max, what);
        idx[(*n)++] = i;
    }
    return 0;
}

static int set_int_list(const struct key_ctx *c, const struct key *k, const char *path, yaml_node_t *v,
                        void *obj, struct err *e)
{
    char got[96], elem_path[300];
    if (v->type != YAML_SEQUENCE_NODE)
        return yaml_doc_error(c->doc, v, e, "%s must be a list of integers, got %s", path,
                              yaml_node_describe(v, got, sizeof got));
    size_t cap = k->size / sizeof(int), n = 0;
    struct key elem = *k;
    elem.size = sizeof(int);
    int *out = (int *)((char *)obj + k->offset);
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, n++) {
        yaml_node_t *item = yaml_doc_node(c->doc, *it);
        if (n == cap)
            return yaml_doc_error(c->doc, item, e, "%s has more than %zu entries", path, cap);
        snprintf(elem_path, sizeof elem_path, "%s[%zu]", path, n);
        if (set_integer(c, &elem, elem_path, item, &out[n], e))
            return -1;
    }
    if (n == 0)
        return yaml_doc_error(c->doc, v, e, "%s must not be empty", path);
    int count = (int)n;
    memcpy((char *)obj + k->count_offset, &count, sizeof count);
    return 0;
}

static int set_value(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *obj, struct err *e)
{
    char path[256];
    keytable_path(c->where, k->name, path, sizeof path);
    void *field = (char *)obj + k->offset;
    switch (k->type) {
    case KEY_INT:
    case KEY_UINT:
        return set_integer(c, k, path, v, field, e);
    case KEY_FLOAT:
        return set_float(c, k, path, v, field, e);
    case KEY_SIZE:
        return set_size(c, path, v, field, e);
    case KEY_BOOL:
        return set_bool(c, path, v, field, e);
    case KEY_ENUM:
        return set_enum(c, k, path, v, field, e);
    case KEY_STRING:
        return set_string(c, k, path, v, field, e);
    case KEY_INT_LIST:
        return set_int_list(c, k, path, v, obj, e);
    case KEY_TABLE: {
        if (keytable_expect_mapping(c, v, path, e))
            return -1;
        struct key_ctx sub = {c->doc, c->root, path};
        return keytable_apply(k->sub, &sub, v, field, e);
    }
    case KEY_CUSTOM: {
        struct key_ctx here = {c->doc, c->root, path};
        return k->parse(&here, k, v, field, e);
    }
    }
    return yaml_doc_error(c->doc, v, e, "%s: key type %d is not handled", path, (int)k->type);
}

static const char *key_name_at(const void *list, size_t i)
{
    return ((const struct key *)list)[i].name;
}

static const struct key *find_key(const struct key_table *t, const char *name)
{
    for (size_t i = 0; i < t->nkeys; i++)
        if (!strcmp(t->keys[i].name, name))
            return &t->keys[i];
    return NULL;
}

static int unknown_key(const struct key_table *t, const struct key_ctx *c, yaml_node_t *key, struct err *e)
{
    const char *name = yaml_scalar_text(key);
    const char *near = suggest_closest(name, t->nkeys, key_name_at, t->keys);
    char in[160];
    if (*c->where)
        snprintf(in, sizeof in, "in %s", c->where);
    else
        snprintf(in, sizeof in, "at the top level");
    if (near)
        return yaml_doc_error(c->doc, key, e, "unknown key '%s' %s (did you mean '%s'?)", name, in, near);
    return yaml_doc_error(c->doc, key, e, "unknown key '%s' %s", name, in);
}

int keytable_apply(const struct key_table *t, const struct key_ctx *c, yaml_node_t *mapping, void *obj,
                   struct err *e)
{
    char got[96];
    if (keytable_expect_mapping(c, mapping, *c->where ? c->where : "a scenario", e))
        return -1;
    yaml_node_pair_t *pairs = mapping->data.mapping.pairs.start, *end = mapping->data.mapping.pairs.top;
    for (yaml_node_pair_t *p = pairs; p < end; p++) {
        yaml_node_t *key = yaml_doc_node(c->doc, p->key);
        if (key->type != YAML_SCALAR_NODE)
            return yaml_doc_error(c->doc, key, e, "a key must be a name, got %s",
                                  yaml_node_describe(key, got, sizeof got));
        const char *name = yaml_scalar_text(key);
        yaml_node_t *first = yaml_mapping_earlier(c->doc, mapping, p, name);
        if (first)
            return yaml_doc_error(c->doc, key, e, "duplicate key '%s' %s%s (first at line %zu)", name,
                                  *c->where ? "in " : "at the top level", c->where, first->start_mark.line + 1);
        const struct key *k = find_key(t, name);
        if (!k)
            return unknown_key(t, c, key, e);
        if (set_value(c, k, yaml_doc_node(c->doc, p->value), obj, e))
            return -1;
    }
    for (size_t i = 0; i < t->nkeys; i++) {
        if (t->keys[i].required && !yaml_mapping_get(c->doc, mapping, t->keys[i].name, NULL))
            return yaml_doc_error(c->doc, mapping, e, "missing key '%s' %s%s", t->keys[i].name,
                                  *c->where ? "in " : "at the top level", c->where);
    }
    return t->check ? t->check(c, mapping, obj, e) : 0;
}
