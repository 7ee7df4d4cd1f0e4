/* keytable_doc.c: Markdown reference of a key table and the tables under it, defaults included
 * (read from the table's own init(), the same one the loader starts from). */
#include "scenario/keytable.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define DOC_MAX_TABLES 32

/* "30GiB" when a binary unit divides the size exactly, otherwise bytes. */
static void format_size(uint64_t n, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t u = 0;
    while (n && u + 1 < sizeof units / sizeof units[0] && n % 1024 == 0) {
        n /= 1024;
        u++;
    }
    snprintf(buf, len, "%llu%s", (unsigned long long)n, units[u]);
}

static void range_text(const char *what, const struct key *k, char *buf, size_t len)
{
    if (k->imax == LLONG_MAX)
        snprintf(buf, len, "%s >= %lld", what, k->imin);
    else
        snprintf(buf, len, "%s %lld..%lld", what, k->imin, k->imax);
}

const char *keytable_anchor(const char *heading, char *buf, size_t len)
{
    size_t n = 0;
    for (const char *p = heading; *p && n + 1 < len; p++)
        if (isalnum((unsigned char)*p) || *p == '-' || *p == '_')
            buf[n++] = (char)tolower((unsigned char)*p);
    buf[n] = 0;
    return buf;
}

void keytable_type_text(const struct key *k, char *buf, size_t len)
{
    size_t used;
    switch (k->type) {
    case KEY_INT:
    case KEY_UINT:
        range_text("integer", k, buf, len);
        return;
    case KEY_SIZE:
        snprintf(buf, len, "size (`30GiB`, `512MiB`, `1.5GB`, bytes)");
        return;
    case KEY_FLOAT:
        if (k->fopen)
            snprintf(buf, len, "number in (%g, %g), both excluded", k->fmin, k->fmax);
        else
            snprintf(buf, len, "number %g..%g", k->fmin, k->fmax);
        return;
    case KEY_BOOL:
        snprintf(buf, len, "`true` or `false`");
        return;
    case KEY_ENUM:
        buf[0] = 0;
        used = 0;
        for (int i = 0; i < k->nnames && used < len; i++) {
            const char *sep = i == 0 ? "" : i + 1 == k->nnames ? " or " : ", ";
            used += (size_t)snprintf(buf + used, len - used, "%s`%s`", sep, k->name_of(i));
        }
        return;
    case KEY_STRING:
        snprintf(buf, len, "string (up to %zu characters)", k->size - 1);
        return;
    case KEY_INT_LIST: {
        char range[64];
        range_text("integers", k, range, sizeof range);
        snprintf(buf, len, "list of up to %zu %s", k->size / sizeof(int), range);
        return;
    }
    case KEY_TABLE: {
        char anchor[128];
        snprintf(buf, len, "mapping, see [`%s`](#%s)", k->sub->name,
                 keytable_anchor(k->sub->name, anchor, sizeof anchor));
        return;
    }
    case KEY_CUSTOM:
        snprintf(buf, len, "%s", k->doc_type);
        return;
    }
}

void keytable_default_text(const struct key *k, const void *obj, char *buf, size_t len)
{
    const char *field = (const char *)obj + k->offset;
    long long v;
    if (k->required) {
        snprintf(buf, len, "required");
        return;
    }
    switch (k->type) {
    case KEY_INT:
    case KEY_UINT:
    case KEY_ENUM:
        v = keytable_read_integer(field, k->size, k->type != KEY_UINT);
        if (k->type == KEY_ENUM)
            snprintf(buf, len, "`%s`", k->name_of((int)v));
        else if (v == 0 && k->zero_means)
            snprintf(buf, len, "0 (%s)", k->zero_means);
        else
            snprintf(buf, len, "%lld", v);
        return;
    case KEY_SIZE: {
        uint64_t n;
        memcpy(&n, field, sizeof n);
        if (n == 0 && k->zero_means)
            snprintf(buf, len, "%s", k->zero_means);
        else
            format_size(n, buf, len);
        return;
    }
    case KEY_FLOAT: {
        double d = keytable_read_float(k, field);
        if (d == 0 && k->zero_means)
            snprintf(buf, len, "0 (%s)", k->zero_means);
        else
            snprintf(buf, len, "%g", d);
        return;
    }
    case KEY_BOOL: {
        bool b;
        memcpy(&b, field, sizeof b);
        snprintf(buf, len, "`%s`", b ? "true" : "false");
        return;
    }
    case KEY_STRING:
        if (!*field)
            snprintf(buf, len, "%s", k->zero_means ? k->zero_means : "empty");
        else
            snprintf(buf, len, "`%s`", field);
        return;
    case KEY_INT_LIST: {
        int count, x;
        memcpy(&count, (const char *)obj + k->count_offset, sizeof count);
        if (count == 0) {
            snprintf(buf, len, "%s", k->zero_means ? k->zero_means : "none");
            return;
        }
        size_t used = (size_t)snprintf(buf, len, "[");
        for (int i = 0; i < count && used < len; i++) {
            memcpy(&x, field + (size_t)i * sizeof x, sizeof x);
            used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? ", " : "", x);
        }
        if (used < len)
            snprintf(buf + used, len - used, "]");
        return;
    }
    case KEY_TABLE:
        snprintf(buf, len, "-");
        return;
    case KEY_CUSTOM:
        if (k->format)
            k->format(k, field, buf, len);
        else
            snprintf(buf, len, "%s", k->zero_means ? k->zero_means : "-");
        return;
    }
}

static void print_table(FILE *f, const struct key_table *t)
{
    void *obj = calloc(1, t->obj_size ? t->obj_size : 1);
    if (!obj)
        return;
    if (t->init)
        t->init(obj);
    fprintf(f, "## `%s`\n\n%s\n\n", t->name, t->help);
    fprintf(f, "| Key | Type | Default | Meaning |\n|---|---|---|---|\n");
    for (size_t i = 0; i < t->nkeys; i++) {
        const struct key *k = &t->keys[i];
        char type[640], def[256];
        keytable_type_text(k, type, sizeof type);
        keytable_default_text(k, obj, def, sizeof def);
        fprintf(f, "| `%s` | %s | %s | %s |\n", k->name, type, def, k->help);
    }
    fprintf(f, "\n");
    free(obj);
}

static void print_tree(FILE *f, const struct key_table *t, const struct key_table **seen, size_t *nseen)
{
    for (size_t i = 0; i < *nseen; i++)
        if (seen[i] == t)
            return;
    if (*nseen == DOC_MAX_TABLES)
        return;
    seen[(*nseen)++] = t;
    print_table(f, t);
    for (size_t i = 0; i < t->nkeys; i++)
        if (t->keys[i].sub)
            print_tree(f, t->keys[i].sub, seen, nseen);
}

void keytable_print_markdown(FILE *f, const struct key_table *t)
{
    const struct key_table *seen[DOC_MAX_TABLES];
    size_t nseen = 0;
    print_tree(f, t, seen, &nseen);
}
