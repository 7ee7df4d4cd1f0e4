/* keytable.h: a table of YAML keys that fills a C struct, in the style of fio's option table.
 * One table per mapping (top level, model, job, variant, expect). The loader walks a mapping node
 * and, for each key, finds its row and stores the value at the row's offset with a typed setter;
 * the documentation printer reads the very same rows, so the docs cannot drift from the loader.
 * Every error names "file:line:col" and the dotted path of the key ("job.batch_size"). */
#ifndef OOMLAB_KEYTABLE_H
#define OOMLAB_KEYTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "scenario/yaml_doc.h"
#include "util/err.h"

enum key_type {
    KEY_INT,      /* signed integer of `size` bytes (1, 2, 4, 8) in [imin, imax] */
    KEY_UINT,     /* unsigned integer of `size` bytes in [imin, imax] */
    KEY_SIZE,     /* uint64_t bytes, written "30GiB", "512MiB", "1.5GB" or a plain number */
    KEY_FLOAT,    /* double (size 8) or float (size 4) in [fmin, fmax], or (fmin, fmax) when fopen */
    KEY_BOOL,     /* bool: true or false */
    KEY_ENUM,     /* enum (int): the i whose name_of(i) is the value, 0 <= i < nnames */
    KEY_STRING,   /* char[size], NUL-terminated; longer values are an error */
    KEY_INT_LIST, /* int[size / sizeof(int)] from a YAML list of integers in [imin, imax];
                   * the count goes to the int at count_offset */
    KEY_TABLE,    /* a nested mapping, filled by `sub` at offset */
    KEY_CUSTOM,   /* anything else: `parse` reads the node (it may use `sub` for a mapping) */
};

struct key;
struct key_table;

/* Where a mapping is being read: the document, the whole object being filled (for checks across
 * sections) and the dotted path of the mapping ("" at the top, "job", "variants.after"). */
struct key_ctx {
    struct yaml_doc *doc;
    void *root;
    const char *where;
};

typedef int (*key_parse_fn)(const struct key_ctx *c, const struct key *k, yaml_node_t *value, void *field,
                            struct err *e);
typedef void (*key_format_fn)(const struct key *k, const void *field, char *buf, size_t len);

struct key {
    const char *name;
    enum key_type type;
    size_t offset;               /* of the field inside the table's struct */
    size_t size;                 /* of the field (sizeof) */
    long long imin, imax;        /* KEY_INT, KEY_UINT */
    double fmin, fmax;           /* KEY_FLOAT */
    bool fopen;                  /* KEY_FLOAT: fmin and fmax themselves are out of range */
    const char *(*name_of)(int); /* KEY_ENUM: the allowed values */
    int nnames;
    size_t count_offset;         /* KEY_INT_LIST: where the number of elements goes */
    const struct key_table *sub; /* KEY_TABLE; KEY_CUSTOM that reads mappings (for the docs) */
    key_parse_fn parse;          /* KEY_CUSTOM */
    const char *doc_type;        /* KEY_CUSTOM: the type column of the docs */
    key_format_fn format;        /* KEY_CUSTOM: the default column of the docs (NULL: "-") */
    const char *zero_means;      /* docs: what a zero (or empty) default means; KEY_CUSTOM: its default */
    bool required;               /* missing key is an error */
    const char *help;            /* one sentence for the docs */
};

struct key_table {
    const char *name;            /* the section in the docs: "job", "variants.NAME.expect" */
    const char *help;            /* a paragraph for the docs */
    const struct key *keys;
    size_t nkeys;
    size_t obj_size;             /* sizeof the struct the table fills */
    void (*init)(void *obj);     /* its defaults (NULL: all zero); the loader uses the same ones */
    /* Checks across keys after the whole mapping is read (NULL: none). */
    int (*check)(const struct key_ctx *c, yaml_node_t *mapping, void *obj, struct err *e);
};

/* Fills `obj` from `mapping` by the table: unknown, duplicate and missing required keys, wrong types
 * and out-of-range values are ERR_INPUT errors "file:line:col: ...". Keys not present keep the values
 * already in `obj`. */
int keytable_apply(const struct key_table *t, const struct key_ctx *c, yaml_node_t *mapping, void *obj,
                   struct err *e);

/* Checks that the fields of `obj` the table's integer, enum and number keys fill are within their
 * bounds (for structs filled by code rather than by keytable_apply); the message names
 * "<where>.<key>" and the bounds as keytable_apply's would. */
int keytable_check_values(const struct key_table *t, const void *obj, const char *where, struct err *e);

/* The value of an integer field of `size` bytes (KEY_INT, KEY_UINT, KEY_ENUM). */
long long keytable_read_integer(const void *field, size_t size, bool is_signed);
double keytable_read_float(const struct key *k, const void *field); /* KEY_FLOAT, float or double */

/* The documentation of one key: its type with its bounds ("integer 0..4096"), and its default as the
 * value in `defaults` (an object the table's init filled) shows it ("0 (never)", "`bf16`"). */
void keytable_type_text(const struct key *k, char *buf, size_t len);
void keytable_default_text(const struct key *k, const void *defaults, char *buf, size_t len);

/* The path of `name` under `where` ("job" + "batch_size" -> "job.batch_size"). */
const char *keytable_path(const char *where, const char *name, char *buf, size_t len);

/* Fails unless `n` is a mapping ("<path> must be a mapping, got a list"). */
int keytable_expect_mapping(const struct key_ctx *c, yaml_node_t *n, const char *path, struct err *e);

/* Reads a YAML list of names from names[] into the indexes it names, in order, without repeats.
 * `what` names one element in messages ("fault"). */
int keytable_read_names(const struct key_ctx *c, yaml_node_t *list, const char *path, const char *what,
                        const char *const *names, size_t nnames, int *idx, size_t max, size_t *n,
                        struct err *e);

/* Writes the table, and after it every table reached through its keys, as Markdown sections headed
 * by the table's name; keytable_anchor gives the link anchor of such a heading (GitHub's: lower case,
 * punctuation other than '-' and '_' dropped). */
const char *keytable_anchor(const char *table_name, char *buf, size_t len);
void keytable_print_markdown(FILE *f, const struct key_table *t);

#endif
