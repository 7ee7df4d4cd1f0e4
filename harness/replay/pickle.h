/* pickle.h: a reader for the plain-data subset of Python's pickle format (protocols 2-5), enough to
 * load PyTorch memory snapshots without Python. It understands dicts, lists, tuples, str, bytes,
 * ints from -2^63 to 2^64-1, floats, bools and None, plus the framing and memo opcodes; any opcode
 * that would build a Python object (GLOBAL, REDUCE, BUILD, NEWOBJ, STACK_GLOBAL, PERSID, sets, ...)
 * is rejected with a message naming its byte offset and name. Values live in one arena owned by
 * a struct pickle_doc and are freed together; memo GETs share values, so the result is a DAG (a
 * pickled list that contains itself even loads as a cycle: walk values by path, not by blind
 * recursion). Strings are the bytes stored in the pickle (UTF-8 from Python), NUL-terminated for
 * convenience, and may contain NULs; a dict keeps its items in pickle order, and a key set twice
 * appears twice, with lookup returning the later value, as Python would. */
#ifndef OOMLAB_PICKLE_H
#define OOMLAB_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

enum pickle_type { PICKLE_NONE, PICKLE_BOOL, PICKLE_INT, PICKLE_FLOAT, PICKLE_STR, PICKLE_BYTES,
                   PICKLE_LIST, PICKLE_TUPLE, PICKLE_DICT };

struct pickle_doc;
struct pickle_value;

/* Parses `len` bytes of pickle; `name` prefixes every message ("NAME: byte 12: ..."). Errors are
 * ERR_INPUT (ERR_INTERNAL when memory runs out); on failure *out is NULL and nothing needs freeing.
 * Bytes after the STOP opcode are ignored, as pickle.loads does. */
int pickle_parse(const char *name, const unsigned char *data, size_t len, struct pickle_doc **out, struct err *e);
void pickle_free(struct pickle_doc *doc);
const struct pickle_value *pickle_root(const struct pickle_doc *doc);

enum pickle_type pickle_type(const struct pickle_value *v);
/* Python's name for the type: "None", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict". */
const char *pickle_type_name(enum pickle_type t);

/* Scalar accessors: each returns false (leaving *out alone) when the value has another type or,
 * for ints, lies outside the requested range. A bool is not an int here. */
bool pickle_get_bool(const struct pickle_value *v, bool *out);
bool pickle_get_i64(const struct pickle_value *v, int64_t *out);
bool pickle_get_u64(const struct pickle_value *v, uint64_t *out);
bool pickle_get_float(const struct pickle_value *v, double *out);
/* str and bytes: the data (NUL-terminated) and its length, or NULL for any other type. */
const char *pickle_str(const struct pickle_value *v, size_t *len);
const unsigned char *pickle_bytes(const struct pickle_value *v, size_t *len);

/* Containers: the number of items of a list or tuple, or of key/value pairs of a dict (0 for
 * anything else), and the items by index (NULL when out of range or not a container). */
size_t pickle_len(const struct pickle_value *v);
const struct pickle_value *pickle_item(const struct pickle_value *list_or_tuple, size_t i);
/* A list's or tuple's items in one array (*n of them; NULL and 0 for anything else): for hot loops. */
const struct pickle_value *const *pickle_items(const struct pickle_value *list_or_tuple, size_t *n);
const struct pickle_value *pickle_dict_key(const struct pickle_value *dict, size_t i);
const struct pickle_value *pickle_dict_value(const struct pickle_value *dict, size_t i);
/* The value stored under the str key `key` (the last one if set twice), or NULL. */
const struct pickle_value *pickle_dict_get(const struct pickle_value *dict, const char *key);
/* A dict's pairs in one array, key, value, key, value, ... (*npairs pairs; NULL and 0 for anything else). */
const struct pickle_value *const *pickle_dict_pairs(const struct pickle_value *dict, size_t *npairs);

/* Streaming: the records of a root dict's list of lists (a snapshot's device_traces, each device's list of
 * event dicts) handed to the client as each is built instead of being kept, and the list each record holds
 * under one key (an event's frames) handed over as its items are appended. The document then holds, under
 * root_key, the lists with a placeholder per record, in order. This holds only for the shape CPython's
 * pickler writes; whatever leaves it (a record reached twice through the memo, a record list extended out
 * of order, a streamed value stored anywhere else, a malformed pickle) makes pickle_parse_streamed return
 * 1, and the caller parses the input whole with pickle_parse. */
struct pickle_stream {
    const char *root_key;  /* "device_traces" */
    const char *list_key;  /* "frames" */
    void *ctx;
    /* A record list_key list's items (not kept): 0 with *token (not 0) naming what the client made of them,
     * or -1 (the parse stops and returns 1). */
    int (*on_list)(void *ctx, const struct pickle_value *const *items, size_t n, uintptr_t *token);
    /* Record `index` (in the order they appear under root_key) complete, its pairs key, value, ...: 0, or -1. A
     * value may be a list_key list's placeholder (pickle_streamed_list). */
    int (*on_record)(void *ctx, size_t index, const struct pickle_value *const *pairs, size_t npairs);
};
/* 0 (*out the document), 1 (the input leaves the streamed shape, or is not a valid pickle, or memory ran
 * out: nothing to free, parse it with pickle_parse for the document or the message), never -1. */
int pickle_parse_streamed(const char *name, const unsigned char *data, size_t len, const struct pickle_stream *s,
                          struct pickle_doc **out);
/* Whether v is a streamed list_key list; *token is what on_list returned, 0 for one that got no items. */
bool pickle_streamed_list(const struct pickle_value *v, uintptr_t *token);

#endif
