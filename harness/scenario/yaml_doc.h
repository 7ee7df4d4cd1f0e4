/* yaml_doc.h: one YAML file loaded as a libyaml document, with errors that name "file:line:col".
 * Positions are 1-based (libyaml's marks are 0-based). A file must hold exactly one document.
 * Limits (README "Limits"): at most YAML_DOC_MAX_BYTES, collections nested at most YAML_DOC_MAX_DEPTH
 * deep, and no NUL character in any string. */
#ifndef OOMLAB_YAML_DOC_H
#define OOMLAB_YAML_DOC_H

#include <stddef.h>
#include <yaml.h>

#include "util/err.h"

#define YAML_DOC_MAX_BYTES (4u << 20) /* 4 MiB: scenario files are a few KB */
#define YAML_DOC_MAX_DEPTH 64         /* nested mappings and lists; scenarios use 4 */

struct yaml_doc {
    char path[512];       /* as given by the caller; prefixes every message */
    yaml_document_t doc;  /* valid after a successful yaml_doc_load */
};

/* Reads and parses `path`. An empty file (nothing but comments or blanks), a second document,
 * invalid UTF-8, syntax errors and the limits above fail with ERR_INPUT; on failure nothing needs
 * freeing. */
int yaml_doc_load(struct yaml_doc *d, const char *path, struct err *e);
void yaml_doc_free(struct yaml_doc *d);

yaml_node_t *yaml_doc_root(struct yaml_doc *d);
yaml_node_t *yaml_doc_node(struct yaml_doc *d, int index);

/* Sets ERR_INPUT with "path:line:col: " + message, positioned at the start of `at`; returns -1. */
int yaml_doc_error(const struct yaml_doc *d, const yaml_node_t *at, struct err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The value of `key` in mapping `m` (and the key node itself through key_node, if not NULL), or NULL. */
yaml_node_t *yaml_mapping_get(struct yaml_doc *d, yaml_node_t *m, const char *key, yaml_node_t **key_node);

/* The key node of an earlier pair of `m` (before `upto`) that reads `key`, or NULL: a duplicate. */
yaml_node_t *yaml_mapping_earlier(struct yaml_doc *d, yaml_node_t *m, const yaml_node_pair_t *upto, const char *key);

/* The text of a scalar node (NUL-terminated by libyaml), or NULL for sequences and mappings. */
const char *yaml_scalar_text(const yaml_node_t *n);
/* True for an empty plain scalar or a plain null/~: a key written with no value. */
int yaml_is_null(const yaml_node_t *n);
/* True for a scalar written in quotes (so "8" is a string, never a number). */
int yaml_is_quoted(const yaml_node_t *n);
/* How a node reads in a message: "a list", "a mapping", "nothing", or the scalar in quotes. */
const char *yaml_node_describe(const yaml_node_t *n, char *buf, size_t len);

#endif
