/* pickle.c: a stack machine for the plain-data pickle opcodes (see pickle.h). It follows CPython's
 * Unpickler: MARK opens a new stack frame whose items only the marked opcodes (LIST, TUPLE, DICT,
 * APPENDS, SETITEMS) can reach, MEMOIZE stores under len(memo), and values are shared through the
 * memo rather than copied. Values and container arrays come from an arena of chunks; the stack,
 * mark and memo arrays are scratch space freed when parsing ends. Every opcode does work bounded by
 * the values it pushed or pops, so parsing is linear in the input. Dicts of more than
 * DICT_INDEX_MIN keys get a sorted index of their str keys when parsing ends, so a lookup costs
 * O(log n) however often a shared dict is read. A streamed parse (pickle_parse_streamed) runs the same
 * machine but hands one list of lists of records to its client as they close (see "streaming"). */
#define _GNU_SOURCE /* qsort_r */
#include "replay/pickle.h"
#include "util/prefault.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

/* The per-opcode helpers of the hot opcodes (memo GETs and PUTs, small ints, pushes): inlined into the
 * dispatch loop, which runs once per opcode (hundreds of thousands in a snapshot). */
#define HOT static inline __attribute__((always_inline))

/* Values are 16 bytes; strings and containers keep their variable part in a second record. */
struct pickle_string {
    size_t len;
    char data[];  /* NUL-terminated copy */
};

struct pickle_seq {
    struct pickle_value **items;  /* a dict interleaves key, value, key, value, ... */
    size_t len;                   /* items of a list or tuple; pairs of a dict */
    size_t cap;                   /* slots in items */
    size_t *index;                /* a big dict: its pairs with str keys, by (key, pair number); else NULL */
    size_t nindex;
};

#define DICT_INDEX_MIN 16  /* below this many pairs a lookup scans the pairs */

struct pickle_value {
    unsigned char type;  /* enum pickle_type */
    bool negative;       /* int: bits holds a negative value in two's complement */
    unsigned char role;  /* enum role: what a streamed parse made of it (see "streaming" below) */
    unsigned char state; /* a placeholder's: enum placeholder_state */
    union {
        bool b;
        uint64_t bits;
        double f;
        struct pickle_string *s;
        struct pickle_seq *seq;
    } as;
};

/* What a streamed parse (pickle_parse_streamed) made of a value: the root dict's root_key list of lists
 * (ROLE_TRACES), one of its lists (ROLE_RECORDS), a placeholder for one of their dicts (ROLE_RECORD), a
 * placeholder for a record's list_key list (ROLE_LIST); 0 for everything else. */
enum role { ROLE_NONE, ROLE_TRACES, ROLE_RECORDS, ROLE_RECORD, ROLE_LIST };
enum placeholder_state { OPEN, DONE, TAKEN_EMPTY }; /* TAKEN_EMPTY: a list_key list used before any item came */

#define ARENA_CHUNK (64 * 1024)
#define ARENA_ALIGN 8  /* the strictest alignment of what the arena holds: pointers, uint64_t, double */

struct arena_chunk {
    struct arena_chunk *next;
    size_t used, size;
    alignas(max_align_t) unsigned char data[];
};

struct pickle_doc {
    struct arena_chunk *chunks;  /* the head is the one being filled */
    const struct pickle_value *root;
};

/* A new chunk for n bytes (arena_alloc's slow path): a request larger than a quarter chunk gets a chunk
 * of its own, linked behind the head so the head's free space is not abandoned. */
static void *arena_alloc_chunk(struct pickle_doc *doc, size_t n)
{
    struct arena_chunk *head = doc->chunks;
    bool own = n > ARENA_CHUNK / 4;
    size_t size = own ? n : ARENA_CHUNK;
    struct arena_chunk *c = malloc(sizeof *c + size);
    if (!c)
        return NULL;
    /* A second shared chunk is filled front to back like the first: its pages made present in one call
     * (util/prefault.h; DeComFL replay: page faults 1,572 -> 1,342, task-clock -0.2 to -0.5 ms). The first
     * is left to fault in page by page: a small pickle touches a page or two of it. */
    if (!own && head)
        prefault_if_fresh(c, sizeof *c + size);
    c->size = size;
    c->used = n;
    if (own && head) {
        c->next = head->next;
        head->next = c;
    } else {
        c->next = head;
        doc->chunks = c;
    }
    return c->data;
}

/* n bytes from the arena: every value of the document is one, so the common case is a bump of the head. */
HOT void *arena_alloc(struct pickle_doc *doc, size_t n)
{
    n = (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
    struct arena_chunk *head = doc->chunks;
    if (head && head->size - head->used >= n) {
        void *p = head->data + head->used;
        head->used += n;
        return p;
    }
    return arena_alloc_chunk(doc, n);
}

void pickle_free(struct pickle_doc *doc)
{
    if (!doc)
        return;
    struct arena_chunk *c = doc->chunks;
    while (c) {
        struct arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc);
}

/* ---- opcodes ---- */

enum opcode {
    OP_MARK = 0x28, OP_STOP = 0x2e, OP_EMPTY_TUPLE = 0x29, OP_BINBYTES = 0x42, OP_SHORT_BINBYTES = 0x43,
    OP_BINFLOAT = 0x47, OP_BININT = 0x4a, OP_BININT1 = 0x4b, OP_BININT2 = 0x4d, OP_NONE = 0x4e,
    OP_BINUNICODE = 0x58, OP_EMPTY_LIST = 0x5d, OP_APPEND = 0x61, OP_DICT = 0x64, OP_APPENDS = 0x65,
    OP_GET = 0x67, OP_BINGET = 0x68, OP_LONG_BINGET = 0x6a, OP_LIST = 0x6c, OP_PUT = 0x70, OP_BINPUT = 0x71,
    OP_LONG_BINPUT = 0x72, OP_SETITEM = 0x73, OP_TUPLE = 0x74, OP_SETITEMS = 0x75, OP_EMPTY_DICT = 0x7d,
    OP_PROTO = 0x80, OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a, OP_LONG4 = 0x8b, OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE8 = 0x8d,
    OP_BINBYTES8 = 0x8e, OP_MEMOIZE = 0x94, OP_FRAME = 0x95,
};

/* Every opcode of pickle protocols 0-5 (Lib/pickletools.py), for messages. */
static const char *const opcode_names[256] = {
    ['('] = "MARK", ['.'] = "STOP", ['0'] = "POP", ['1'] = "POP_MARK", ['2'] = "DUP", ['F'] = "FLOAT",
    ['I'] = "INT", ['J'] = "BININT", ['K'] = "BININT1", ['L'] = "LONG", ['M'] = "BININT2", ['N'] = "NONE",
    ['P'] = "PERSID", ['Q'] = "BINPERSID", ['R'] = "REDUCE", ['S'] = "STRING", ['T'] = "BINSTRING",
    ['U'] = "SHORT_BINSTRING", ['V'] = "UNICODE", ['X'] = "BINUNICODE", ['a'] = "APPEND", ['b'] = "BUILD",
    ['c'] = "GLOBAL", ['d'] = "DICT", ['}'] = "EMPTY_DICT", ['e'] = "APPENDS", ['g'] = "GET",
    ['h'] = "BINGET", ['i'] = "INST", ['j'] = "LONG_BINGET", ['l'] = "LIST", [']'] = "EMPTY_LIST",
    ['o'] = "OBJ", ['p'] = "PUT", ['q'] = "BINPUT", ['r'] = "LONG_BINPUT", ['s'] = "SETITEM",
    ['t'] = "TUPLE", [')'] = "EMPTY_TUPLE", ['u'] = "SETITEMS", ['G'] = "BINFLOAT", ['B'] = "BINBYTES",
    ['C'] = "SHORT_BINBYTES", [0x80] = "PROTO", [0x81] = "NEWOBJ", [0x82] = "EXT1", [0x83] = "EXT2",
    [0x84] = "EXT4", [0x85] = "TUPLE1", [0x86] = "TUPLE2", [0x87] = "TUPLE3", [0x88] = "NEWTRUE",
    [0x89] = "NEWFALSE", [0x8a] = "LONG1", [0x8b] = "LONG4", [0x8c] = "SHORT_BINUNICODE",
    [0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8", [0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS",
    [0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX", [0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE",
    [0x95] = "FRAME", [0x96] = "BYTEARRAY8", [0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};

/* ---- parser state and errors ---- */

struct parser {
    const char *name;
    const unsigned char *data;
    size_t len, pos;
    size_t op_pos;         /* offset of the opcode being executed */
    unsigned char op;
    struct pickle_doc *doc;
    struct pickle_value **stack;
    size_t depth, stack_cap;
    size_t *marks;         /* stack depths at each open MARK */
    size_t nmarks, marks_cap;
    struct pickle_value **memo;  /* NULL where nothing was stored */
    size_t memo_cap, memo_count;
    struct pickle_value **big_dicts;  /* dicts that grew past DICT_INDEX_MIN pairs, to index at the end */
    size_t nbig_dicts, big_dicts_cap;
    /* Scalars that repeat, made once per document and shared (values are immutable once pushed): None,
     * False, True, and the ints 0-255 (BININT1: a snapshot's streams, devices, many sizes). */
    struct pickle_value *none, *bools[2], *small_ints[256];
    struct err *e;
    /* pickle_parse_streamed: the client, the root dict, its root_key list, and the record lists in the
     * order they were made (how many of them are in the root_key list so far), and the records made and
     * appended to the lists so far */
    const struct pickle_stream *stream;
    struct pickle_value *stream_root, *traces;
    struct pickle_value **lists;
    size_t nlists, lists_cap, lists_placed;
    size_t nrecords, records_placed;
};

static int leave_stream(struct parser *p);

static const char *op_name(const struct parser *p)
{
    return opcode_names[p->op];
}

static int out_of_memory(struct parser *p)
{
    return err_set(p->e, ERR_INTERNAL, "%s: out of memory at byte %zu of the pickle", p->name, p->op_pos);
}

static int malformed(struct parser *p, const char *what)
{
    return err_set(p->e, ERR_INPUT, "%s: byte %zu: malformed pickle: %s %s", p->name, p->op_pos, op_name(p), what);
}

static int truncated(struct parser *p, uint64_t needed)
{
    return err_set(p->e, ERR_INPUT, "%s: truncated pickle at byte %zu (%s at byte %zu needs %llu byte%s, %zu left)",
                   p->name, p->len, op_name(p), p->op_pos, (unsigned long long)needed, needed == 1 ? "" : "s",
                   p->len - p->pos);
}

/* The next n argument bytes, or NULL (error set) when the data ends first. */
HOT const unsigned char *take(struct parser *p, uint64_t n)
{
    if (__builtin_expect(n > p->len - p->pos, 0)) {
        truncated(p, n);
        return NULL;
    }
    const unsigned char *b = p->data + p->pos;
    p->pos += n;
    return b;
}

static inline uint64_t little_endian(const unsigned char *b, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | b[i];
    return v;
}

static inline int take_uint(struct parser *p, size_t n, uint64_t *out)
{
    const unsigned char *b = take(p, n);
    if (!b)
        return -1;
    *out = little_endian(b, n);
    return 0;
}

/* ---- values ---- */

/* A value of `type` followed in the same allocation by `extra` bytes for its string or container
 * record; the record itself is left for the caller to fill. */
HOT struct pickle_value *new_value_with(struct parser *p, enum pickle_type type, size_t extra)
{
    struct pickle_value *v = arena_alloc(p->doc, sizeof *v + extra);
    if (!v) {
        out_of_memory(p);
        return NULL;
    }
    *v = (struct pickle_value){.type = (unsigned char)type};
    return v;
}

HOT struct pickle_value *new_value(struct parser *p, enum pickle_type type)
{
    return new_value_with(p, type, 0);
}

/* A str or bytes value holding a copy of the n bytes at `data`. */
static struct pickle_value *new_string(struct parser *p, enum pickle_type type, const unsigned char *data, size_t n)
{
    struct pickle_value *v = new_value_with(p, type, sizeof(struct pickle_string) + n + 1);
    if (!v)
        return NULL;
    v->as.s = (struct pickle_string *)(v + 1);
    v->as.s->len = n;
    memcpy(v->as.s->data, data, n);
    v->as.s->data[n] = '\0';
    return v;
}

/* Notes a dict that grew past DICT_INDEX_MIN pairs (once: its length only grows). */
static int remember_big_dict(struct parser *p, struct pickle_value *dict)
{
    if (p->nbig_dicts == p->big_dicts_cap) {
        size_t n = p->big_dicts_cap ? 2 * p->big_dicts_cap : 64;
        struct pickle_value **grown = realloc(p->big_dicts, n * sizeof *grown);
        if (!grown)
            return out_of_memory(p);
        p->big_dicts = grown;
        p->big_dicts_cap = n;
    }
    p->big_dicts[p->nbig_dicts++] = dict;
    return 0;
}

/* A list, tuple or dict holding `slots` item pointers copied from `items`. */
static struct pickle_value *new_container(struct parser *p, enum pickle_type type, struct pickle_value **items,
                                          size_t slots)
{
    struct pickle_value *v = new_value_with(p, type, sizeof(struct pickle_seq));
    if (!v)
        return NULL;
    struct pickle_seq *seq = (struct pickle_seq *)(v + 1);
    v->as.seq = seq;
    seq->items = NULL;
    if (slots) {
        seq->items = arena_alloc(p->doc, slots * sizeof *items);
        if (!seq->items) {
            out_of_memory(p);
            return NULL;
        }
        memcpy(seq->items, items, slots * sizeof *items);
    }
    seq->cap = slots;
    seq->len = type == PICKLE_DICT ? slots / 2 : slots;
    seq->index = NULL;
    seq->nindex = 0;
    if (type == PICKLE_DICT && seq->len > DICT_INDEX_MIN && remember_big_dict(p, v))
        return NULL;
    return v;
}

/* Appends item pointers to a list or dict. The first batch (pickle writes up to 1000 items per
 * APPENDS or SETITEMS) is stored exactly; later ones grow the arena array by doubling. */
static int container_extend(struct parser *p, struct pickle_value *v, struct pickle_value **items, size_t n)
{
    if (n == 0)
        return 0;
    size_t used = v->type == PICKLE_DICT ? 2 * v->as.seq->len : v->as.seq->len;
    if (used + n > v->as.seq->cap) {
        size_t cap = used ? v->as.seq->cap : n;
        while (cap < used + n)
            cap = cap < 4 ? 8 : 2 * cap;
        struct pickle_value **grown = arena_alloc(p->doc, cap * sizeof *grown);
        if (!grown)
            return out_of_memory(p);
        if (used)
            memcpy(grown, v->as.seq->items, used * sizeof *grown);
        v->as.seq->items = grown;
        v->as.seq->cap = cap;
    }
    memcpy(v->as.seq->items + used, items, n * sizeof *items);
    size_t before = v->as.seq->len;
    v->as.seq->len += v->type == PICKLE_DICT ? n / 2 : n;
    if (v->type == PICKLE_DICT && before <= DICT_INDEX_MIN && v->as.seq->len > DICT_INDEX_MIN)
        return remember_big_dict(p, v);
    return 0;
}

/* ---- the stack ---- */

static int grow_pointers(struct parser *p, struct pickle_value ***arr, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    struct pickle_value **grown = realloc(*arr, n * sizeof *grown);
    if (!grown)
        return out_of_memory(p);
    memset(grown + *cap, 0, (n - *cap) * sizeof *grown);
    *arr = grown;
    *cap = n;
    return 0;
}

HOT int push(struct parser *p, struct pickle_value *v)
{
    if (!v || (p->depth == p->stack_cap && grow_pointers(p, &p->stack, &p->stack_cap, p->depth + 1)))
        return -1;
    p->stack[p->depth++] = v;
    return 0;
}

/* Depth of the innermost open MARK: items below it are out of reach until it is popped. */
static size_t stack_base(const struct parser *p)
{
    return p->nmarks ? p->marks[p->nmarks - 1] : 0;
}

/* Checks that the current stack frame holds at least n values. */
static int require(struct parser *p, size_t n)
{
    size_t have = p->depth - stack_base(p);
    if (have >= n)
        return 0;
    return err_set(p->e, ERR_INPUT, "%s: byte %zu: malformed pickle: %s needs %zu value%s on the stack, found %zu",
                   p->name, p->op_pos, op_name(p), n, n == 1 ? "" : "s", have);
}

static int push_mark(struct parser *p)
{
    if (p->nmarks == p->marks_cap) {
        size_t n = p->marks_cap ? 2 * p->marks_cap : 64;
        size_t *grown = realloc(p->marks, n * sizeof *grown);
        if (!grown)
            return out_of_memory(p);
        p->marks = grown;
        p->marks_cap = n;
    }
    p->marks[p->nmarks++] = p->depth;
    return 0;
}

/* Closes the innermost MARK: *items and *n are the values pushed since, now popped (they stay in
 * the stack array until the next push, long enough to be copied). */
static int pop_mark(struct parser *p, struct pickle_value ***items, size_t *n)
{
    if (!p->nmarks)
        return malformed(p, "without a preceding MARK");
    size_t base = p->marks[--p->nmarks];
    *n = p->depth - base;
    *items = *n ? p->stack + base : NULL; /* the stack may still be NULL: no NULL + 0 */
    p->depth = base;
    return 0;
}

/* The container right below the closed MARK, which APPENDS and SETITEMS extend. */
static struct pickle_value *mark_target(struct parser *p, enum pickle_type want)
{
    if (p->depth == stack_base(p)) {
        malformed(p, want == PICKLE_LIST ? "has no list below its MARK" : "has no dict below its MARK");
        return NULL;
    }
    struct pickle_value *target = p->stack[p->depth - 1];
    if (target->type != want) {
        err_set(p->e, ERR_INPUT, "%s: byte %zu: malformed pickle: %s on a %s, expected a %s", p->name, p->op_pos,
                op_name(p), pickle_type_name(pickle_type(target)), pickle_type_name(want));
        return NULL;
    }
    return target;
}

/* ---- opcode handlers ---- */

HOT int push_int(struct parser *p, uint64_t bits, bool negative)
{
    struct pickle_value *v = new_value(p, PICKLE_INT);
    if (v) {
        v->as.bits = bits;
        v->negative = negative;
    }
    return push(p, v);
}

/* BININT (signed 32-bit) and BININT2 (unsigned). */
static int op_binint(struct parser *p, size_t width)
{
    uint64_t raw;
    if (take_uint(p, width, &raw))
        return -1;
    if (width == 4) {
        int64_t v = (int32_t)(uint32_t)raw;
        return push_int(p, (uint64_t)v, v < 0);
    }
    return push_int(p, raw, false);
}

/* LONG1/LONG4: a little-endian two's complement integer of any length, accepted when it lies in
 * [-2^63, 2^64-1]: bytes past the eighth must only extend the sign. */
static int op_long(struct parser *p, size_t width)
{
    uint64_t n;
    if (take_uint(p, width, &n))
        return -1;
    if (width == 4 && n > INT32_MAX)
        return malformed(p, "has a negative byte count");
    const unsigned char *b = take(p, n);
    if (!b)
        return -1;
    bool negative = n && (b[n - 1] & 0x80);
    size_t low = n < 8 ? n : 8;
    uint64_t bits = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (p->len - (size_t)(b - p->data) >= 8) { /* one load where eight bytes remain (a snapshot's addresses) */
        memcpy(&bits, b, 8);
        bits = low == 8 ? bits : bits & ((UINT64_C(1) << (8 * low)) - 1);
    } else
#endif
        bits = little_endian(b, low);
    if (negative && low < 8)
        bits |= ~UINT64_C(0) << (8 * low);
    bool fits = !negative || (bits >> 63);
    for (size_t i = 8; i < n && fits; i++)
        fits = b[i] == (negative ? 0xff : 0x00);
    if (!fits)
        return err_set(p->e, ERR_INPUT,
                       "%s: byte %zu: integer does not fit in 64 bits (%s of %llu bytes): oomlab reads ints from -2^63 "
                       "to 2^64-1",
                       p->name, p->op_pos, op_name(p), (unsigned long long)n);
    return push_int(p, bits, negative);
}

static int op_binfloat(struct parser *p)
{
    const unsigned char *b = take(p, 8);
    if (!b)
        return -1;
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++)
        bits = bits << 8 | b[i];
    struct pickle_value *v = new_value(p, PICKLE_FLOAT);
    if (v)
        memcpy(&v->as.f, &bits, sizeof v->as.f);
    return push(p, v);
}

static int op_bool(struct parser *p, bool b)
{
    struct pickle_value *v = p->bools[b];
    if (!v && (v = p->bools[b] = new_value(p, PICKLE_BOOL)))
        v->as.b = b;
    return push(p, v);
}

static int op_none(struct parser *p)
{
    return push(p, p->none ? p->none : (p->none = new_value(p, PICKLE_NONE)));
}

/* BININT1: an int 0-255, shared. */
HOT int op_binint1(struct parser *p)
{
    const unsigned char *b = take(p, 1);
    if (!b)
        return -1;
    struct pickle_value *v = p->small_ints[*b];
    if (!v && (v = p->small_ints[*b] = new_value(p, PICKLE_INT)))
        v->as.bits = *b;
    return push(p, v);
}

/* str or bytes whose length is a `width`-byte little-endian prefix. */
static int op_string(struct parser *p, enum pickle_type type, size_t width)
{
    uint64_t n;
    if (take_uint(p, width, &n))
        return -1;
    const unsigned char *b = take(p, n);
    return b ? push(p, new_string(p, type, b, n)) : -1;
}

static int stream_new(struct parser *p, enum pickle_type type);

static int op_empty(struct parser *p, enum pickle_type type)
{
    if (p->stream && type != PICKLE_TUPLE)
        return stream_new(p, type);
    return push(p, new_container(p, type, NULL, 0));
}

/* LIST, TUPLE and DICT: a new container from the values since the last MARK. */
static int stream_plain(struct parser *p, struct pickle_value *const *items, size_t n);

static int op_from_mark(struct parser *p, enum pickle_type type)
{
    struct pickle_value **items = NULL;
    size_t n = 0;
    if (pop_mark(p, &items, &n))
        return -1;
    if (type == PICKLE_DICT && n % 2)
        return malformed(p, "has an odd number of values after its MARK");
    if (p->stream && stream_plain(p, items, n))
        return -1;
    return push(p, new_container(p, type, items, n));
}

/* TUPLE1, TUPLE2, TUPLE3. */
static int op_small_tuple(struct parser *p, size_t n)
{
    if (require(p, n))
        return -1;
    p->depth -= n;
    if (p->stream && stream_plain(p, p->stack + p->depth, n))
        return -1;
    return push(p, new_container(p, PICKLE_TUPLE, p->stack + p->depth, n));
}

static int stream_extend(struct parser *p, struct pickle_value *target, struct pickle_value *const *items, size_t n,
                         bool pairs);

static int op_append(struct parser *p)
{
    if (require(p, 2))
        return -1;
    struct pickle_value *list = p->stack[p->depth - 2];
    int streamed = p->stream ? stream_extend(p, list, p->stack + p->depth - 1, 1, false) : 0;
    if (streamed) {
        p->depth--;
        return streamed < 0 ? -1 : 0;
    }
    if (list->type != PICKLE_LIST)
        return err_set(p->e, ERR_INPUT, "%s: byte %zu: malformed pickle: APPEND to a %s, expected a list", p->name,
                       p->op_pos, pickle_type_name(pickle_type(list)));
    p->depth--;
    return container_extend(p, list, p->stack + p->depth, 1);
}

static int op_setitem(struct parser *p)
{
    if (require(p, 3))
        return -1;
    struct pickle_value *dict = p->stack[p->depth - 3];
    int streamed = p->stream ? stream_extend(p, dict, p->stack + p->depth - 2, 2, true) : 0;
    if (streamed) {
        p->depth -= 2;
        return streamed < 0 ? -1 : 0;
    }
    if (dict->type != PICKLE_DICT)
        return err_set(p->e, ERR_INPUT, "%s: byte %zu: malformed pickle: SETITEM on a %s, expected a dict", p->name,
                       p->op_pos, pickle_type_name(pickle_type(dict)));
    p->depth -= 2;
    return container_extend(p, dict, p->stack + p->depth, 2);
}

/* APPENDS and SETITEMS: extend the container below the MARK with the values above it. */
static int op_extend(struct parser *p, enum pickle_type type)
{
    struct pickle_value **items = NULL;
    size_t n = 0;
    if (pop_mark(p, &items, &n))
        return -1;
    if (type == PICKLE_DICT && n % 2)
        return malformed(p, "has an odd number of values after its MARK");
    int streamed = p->stream && p->depth > stack_base(p)
                       ? stream_extend(p, p->stack[p->depth - 1], items, n, type == PICKLE_DICT)
                       : 0;
    if (streamed)
        return streamed < 0 ? -1 : 0;
    struct pickle_value *target = mark_target(p, type);
    if (!target)
        return -1;
    return container_extend(p, target, items, n);
}

/* Memo indices are bounded by the input size (a pickle stores fewer objects than it has bytes),
 * which keeps a hostile LONG_BINPUT from reserving gigabytes. */
static int check_memo_index(struct parser *p, uint64_t index)
{
    if (index <= p->len)
        return 0;
    return err_set(p->e, ERR_INPUT, "%s: byte %zu: malformed pickle: %s index %llu is out of range", p->name,
                   p->op_pos, op_name(p), (unsigned long long)index);
}

static int memo_put_checked(struct parser *p, uint64_t index)
{
    if (check_memo_index(p, index) || require(p, 1) ||
        grow_pointers(p, &p->memo, &p->memo_cap, (size_t)index + 1))
        return -1;
    if (!p->memo[index])
        p->memo_count++;
    p->memo[index] = p->stack[p->depth - 1];
    return 0;
}

/* The common case inline: a value on the stack stored under an index that has room. */
HOT int memo_put(struct parser *p, uint64_t index)
{
    if (index < p->memo_cap && p->depth > stack_base(p)) {
        p->memo_count += !p->memo[index];
        p->memo[index] = p->stack[p->depth - 1];
        return 0;
    }
    return memo_put_checked(p, index);
}

static int memo_get_checked(struct parser *p, uint64_t index)
{
    if (check_memo_index(p, index))
        return -1;
    if (index >= p->memo_cap || !p->memo[index])
        return err_set(p->e, ERR_INPUT, "%s: byte %zu: malformed pickle: %s of memo index %llu, which was never stored",
                       p->name, p->op_pos, op_name(p), (unsigned long long)index);
    if (p->memo[index]->role == ROLE_RECORD)
        return leave_stream(p);
    return push(p, p->memo[index]);
}

/* The common case inline: an index that was stored. */
HOT int memo_get(struct parser *p, uint64_t index)
{
    if (index < p->memo_cap && p->memo[index]) {
        if (__builtin_expect(p->memo[index]->role == ROLE_RECORD, 0))
            return leave_stream(p);
        return push(p, p->memo[index]);
    }
    return memo_get_checked(p, index);
}

/* BINGET and LONG_BINGET, over half the opcodes of a snapshot (its keys and frames are memo references),
 * ahead of the dispatch when nothing can go wrong: the index stored, the stack with room. false: the
 * dispatch runs the opcode (and says what is wrong). */
HOT bool memo_get_fast(struct parser *p)
{
    unsigned char op = p->data[p->pos];
    size_t width = op == OP_BINGET ? 1 : op == OP_LONG_BINGET ? 4 : 0;
    if (!width || p->len - p->pos <= width || p->depth == p->stack_cap)
        return false;
    const unsigned char *b = p->data + p->pos + 1;
    uint64_t index = width == 1 ? b[0] : (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 | (uint64_t)b[3] << 24;
    struct pickle_value *v = index < p->memo_cap ? p->memo[index] : NULL;
    if (!v || v->role == ROLE_RECORD)
        return false;
    p->stack[p->depth++] = v;
    p->pos += 1 + width;
    return true;
}

/* The decimal argument of the text opcodes PUT and GET, ended by a newline. */
static int take_decimal_line(struct parser *p, uint64_t *out)
{
    const unsigned char *start = p->data + p->pos;
    const unsigned char *nl = memchr(start, '\n', p->len - p->pos);
    if (!nl)
        return err_set(p->e, ERR_INPUT, "%s: truncated pickle at byte %zu (%s at byte %zu has no ending newline)",
                       p->name, p->len, op_name(p), p->op_pos);
    uint64_t v = 0;
    for (const unsigned char *c = start; c < nl; c++) {
        if (*c < '0' || *c > '9' || v > p->len)
            return malformed(p, "has an argument that is not a memo index");
        v = v * 10 + (uint64_t)(*c - '0');
    }
    if (nl == start)
        return malformed(p, "has an argument that is not a memo index");
    p->pos = (size_t)(nl - p->data) + 1;
    *out = v;
    return 0;
}

/* PUT and GET: the text form. */
static int op_memo_text(struct parser *p, bool put)
{
    uint64_t index = 0;
    if (take_decimal_line(p, &index))
        return -1;
    return put ? memo_put(p, index) : memo_get(p, index);
}

/* BINPUT, LONG_BINPUT, BINGET, LONG_BINGET: a 1- or 4-byte index (most opcodes of a snapshot are these). */
HOT int op_memo(struct parser *p, size_t width, bool put)
{
    const unsigned char *b = take(p, width);
    if (!b)
        return -1;
    uint64_t index = width == 1 ? b[0] : (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 | (uint64_t)b[3] << 24;
    return put ? memo_put(p, index) : memo_get(p, index);
}

static int op_proto(struct parser *p)
{
    uint64_t version;
    if (take_uint(p, 1, &version))
        return -1;
    if (version > 5)
        return err_set(p->e, ERR_INPUT, "%s: byte %zu: unsupported pickle protocol %llu (the highest is 5)", p->name,
                       p->op_pos, (unsigned long long)version);
    return 0;
}

/* FRAME only announces how many bytes follow; a frame longer than the data means truncation. */
static int op_frame(struct parser *p)
{
    uint64_t size;
    if (take_uint(p, 8, &size))
        return -1;
    if (size > p->len - p->pos)
        return truncated(p, size);
    return 0;
}

static int unsupported(struct parser *p)
{
    if (!op_name(p))
        return err_set(p->e, ERR_INPUT, "%s: byte %zu: invalid pickle opcode 0x%02x (not a pickle, or a corrupt one)",
                       p->name, p->op_pos, p->op);
    return err_set(p->e, ERR_INPUT,
                   "%s: byte %zu: unsupported pickle opcode 0x%02x (%s): oomlab reads only dicts, lists, tuples, "
                   "strings, bytes, ints, floats, bools and None",
                   p->name, p->op_pos, p->op, op_name(p));
}

HOT int run_opcode(struct parser *p)
{
    switch (p->op) {
    case OP_PROTO: return op_proto(p);
    case OP_FRAME: return op_frame(p);
    case OP_MARK: return push_mark(p);
    case OP_NONE: return op_none(p);
    case OP_NEWTRUE: return op_bool(p, true);
    case OP_NEWFALSE: return op_bool(p, false);
    case OP_BININT: return op_binint(p, 4);
    case OP_BININT1: return op_binint1(p);
    case OP_BININT2: return op_binint(p, 2);
    case OP_LONG1: return op_long(p, 1);
    case OP_LONG4: return op_long(p, 4);
    case OP_BINFLOAT: return op_binfloat(p);
    case OP_SHORT_BINUNICODE: return op_string(p, PICKLE_STR, 1);
    case OP_BINUNICODE: return op_string(p, PICKLE_STR, 4);
    case OP_BINUNICODE8: return op_string(p, PICKLE_STR, 8);
    case OP_SHORT_BINBYTES: return op_string(p, PICKLE_BYTES, 1);
    case OP_BINBYTES: return op_string(p, PICKLE_BYTES, 4);
    case OP_BINBYTES8: return op_string(p, PICKLE_BYTES, 8);
    case OP_EMPTY_DICT: return op_empty(p, PICKLE_DICT);
    case OP_EMPTY_LIST: return op_empty(p, PICKLE_LIST);
    case OP_EMPTY_TUPLE: return op_empty(p, PICKLE_TUPLE);
    case OP_DICT: return op_from_mark(p, PICKLE_DICT);
    case OP_LIST: return op_from_mark(p, PICKLE_LIST);
    case OP_TUPLE: return op_from_mark(p, PICKLE_TUPLE);
    case OP_TUPLE1: return op_small_tuple(p, 1);
    case OP_TUPLE2: return op_small_tuple(p, 2);
    case OP_TUPLE3: return op_small_tuple(p, 3);
    case OP_APPEND: return op_append(p);
    case OP_APPENDS: return op_extend(p, PICKLE_LIST);
    case OP_SETITEM: return op_setitem(p);
    case OP_SETITEMS: return op_extend(p, PICKLE_DICT);
    case OP_MEMOIZE: return memo_put(p, p->memo_count);
    case OP_PUT: return op_memo_text(p, true);
    case OP_BINPUT: return op_memo(p, 1, true);
    case OP_LONG_BINPUT: return op_memo(p, 4, true);
    case OP_GET: return op_memo_text(p, false);
    case OP_BINGET: return op_memo(p, 1, false);
    case OP_LONG_BINGET: return op_memo(p, 4, false);
    default: return unsupported(p);
    }
}

/* ---- dict indexes ---- */

/* Orders str keys by (length, bytes), then equal keys by pair number, so the last of equal keys
 * (the one Python keeps) is the last of its run. */
static int compare_pairs(const void *a, const void *b, void *items_arg)
{
    struct pickle_value *const *items = items_arg;
    size_t i = *(const size_t *)a, k = *(const size_t *)b;
    const struct pickle_string *x = items[2 * i]->as.s, *y = items[2 * k]->as.s;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    int c = memcmp(x->data, y->data, x->len);
    if (c)
        return c;
    return i < k ? -1 : i > k;
}

static int index_dict(struct parser *p, struct pickle_seq *seq)
{
    seq->index = arena_alloc(p->doc, seq->len * sizeof *seq->index);
    if (!seq->index)
        return out_of_memory(p);
    seq->nindex = 0;
    for (size_t i = 0; i < seq->len; i++)
        if (seq->items[2 * i]->type == PICKLE_STR)
            seq->index[seq->nindex++] = i;
    qsort_r(seq->index, seq->nindex, sizeof *seq->index, compare_pairs, seq->items);
    return 0;
}

static int index_big_dicts(struct parser *p)
{
    for (size_t i = 0; i < p->nbig_dicts; i++)
        if (index_dict(p, p->big_dicts[i]->as.seq))
            return -1;
    return 0;
}

/* The value of the last pair whose key is the str key[0..klen), by binary search of the index. */
static const struct pickle_value *indexed_get(const struct pickle_seq *seq, const char *key, size_t klen)
{
    size_t lo = 0, hi = seq->nindex; /* first pair ordered after the key: in [lo, hi] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct pickle_string *k = seq->items[2 * seq->index[mid]]->as.s;
        int c = k->len != klen ? (k->len < klen ? -1 : 1) : memcmp(k->data, key, klen);
        if (c <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    size_t pair = seq->index[lo - 1];
    const struct pickle_string *k = seq->items[2 * pair]->as.s;
    return k->len == klen && memcmp(k->data, key, klen) == 0 ? seq->items[2 * pair + 1] : NULL;
}

/* ---- streaming (pickle_parse_streamed) ----
 * Roles are given where a container is made (EMPTY_LIST, EMPTY_DICT), from where it will sit: the list
 * after the root dict's root_key becomes the record lists' list; a list made as its item, a record list; a
 * dict made as a record list's item, a record placeholder, whose pairs go to on_record at its SETITEMS;
 * a list made as a record's list_key value, a placeholder whose items go to on_list at its APPENDS. The
 * guess is then held to what the pickle does with each value: a streamed value stored anywhere but where
 * its role says, a record reached again through the memo, records placed out of order, or a root_key
 * that is not the final root's leaves the streamed shape (the caller parses the input whole). */

static int leave_stream(struct parser *p)
{
    return err_set(p->e, ERR_INPUT, "%s: byte %zu: leaves the streamed layout", p->name, p->op_pos);
}

static bool is_str(const struct pickle_value *v, const char *s)
{
    size_t n = strlen(s);
    return v && v->type == PICKLE_STR && v->as.s->len == n && memcmp(v->as.s->data, s, n) == 0;
}

/* The role of the container EMPTY_LIST or EMPTY_DICT is about to push, from the container its MARK frame
 * extends (target), the value right below it (APPEND's or SETITEM's target, or its key) and the one below. */
static enum role new_role(const struct parser *p, enum pickle_type type)
{
    size_t d = p->depth, base = stack_base(p);
    struct pickle_value *const *s = p->stack;
    unsigned char target = p->nmarks && base ? s[base - 1]->role : ROLE_NONE;
    const struct pickle_value *below = d > base ? s[d - 1] : NULL, *below2 = d >= base + 2 ? s[d - 2] : NULL;
    unsigned char under = below ? below->role : ROLE_NONE;
    if (type == PICKLE_DICT)
        return target == ROLE_RECORDS || under == ROLE_RECORDS ? ROLE_RECORD : ROLE_NONE;
    if (!p->traces && d >= 2 && s[0]->type == PICKLE_DICT && is_str(below, p->stream->root_key) &&
        ((p->nmarks == 1 && base == 1 && (d - base) % 2 == 1) || (p->nmarks == 0 && d == 2)))
        return ROLE_TRACES;
    if (target == ROLE_TRACES || under == ROLE_TRACES)
        return ROLE_RECORDS;
    if (is_str(below, p->stream->list_key) &&
        ((target == ROLE_RECORD && (d - base) % 2 == 1) || (below2 && below2->role == ROLE_RECORD)))
        return ROLE_LIST;
    return ROLE_NONE;
}

/* EMPTY_LIST or EMPTY_DICT in a streamed parse. */
static int stream_new(struct parser *p, enum pickle_type type)
{
    enum role role = new_role(p, type);
    struct pickle_value *v = role == ROLE_RECORD || role == ROLE_LIST ? new_value(p, PICKLE_NONE)
                                                                      : new_container(p, type, NULL, 0);
    if (!v)
        return -1;
    v->role = (unsigned char)role;
    if (role == ROLE_RECORD)
        v->as.bits = p->nrecords++;
    if (role == ROLE_TRACES) {
        p->traces = v;
        p->stream_root = p->stack[0];
    }
    if (role == ROLE_RECORDS) {
        if (grow_pointers(p, &p->lists, &p->lists_cap, p->nlists + 1))
            return -1;
        p->lists[p->nlists++] = v;
    }
    return push(p, v);
}

/* Items going into a container made from them (LIST, TUPLE, DICT): no streamed value may. */
static int stream_plain(struct parser *p, struct pickle_value *const *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (items[i]->role)
            return leave_stream(p);
    return 0;
}

/* APPEND(S) or SETITEM(S) of items (pairs: key, value, ...) to target in a streamed parse: 1 when the
 * client took them (a record's pairs, a list_key list's items), 0 to store them, -1 to leave. */
static int stream_extend(struct parser *p, struct pickle_value *target, struct pickle_value *const *items, size_t n,
                         bool pairs)
{
    const struct pickle_stream *st = p->stream;
    switch (target->role) {
    case ROLE_RECORD:
        if (!pairs || target->state != OPEN)
            return leave_stream(p);
        for (size_t i = 0; i < n; i += 2) {
            struct pickle_value *v = items[i + 1];
            if (items[i]->role || (v->role && (v->role != ROLE_LIST || !is_str(items[i], st->list_key))))
                return leave_stream(p);
            if (v->role == ROLE_LIST && v->state == OPEN)
                v->state = TAKEN_EMPTY;
        }
        if (st->on_record(st->ctx, (size_t)target->as.bits, (const struct pickle_value *const *)items, n / 2))
            return leave_stream(p);
        target->state = DONE;
        return 1;
    case ROLE_LIST: {
        uintptr_t token = 0;
        if (pairs || target->state != OPEN || stream_plain(p, items, n) ||
            st->on_list(st->ctx, (const struct pickle_value *const *)items, n, &token) || !token)
            return leave_stream(p);
        target->as.bits = token;
        target->state = DONE;
        return 1;
    }
    case ROLE_TRACES:
        for (size_t i = 0; i < n; i++)
            if (pairs || p->lists_placed == p->nlists || items[i] != p->lists[p->lists_placed++])
                return leave_stream(p);
        return 0;
    case ROLE_RECORDS:
        for (size_t i = 0; i < n; i++)
            if (pairs || target != p->lists[p->nlists - 1] || items[i]->role != ROLE_RECORD ||
                items[i]->state != DONE || items[i]->as.bits != p->records_placed++)
                return leave_stream(p);
        return 0;
    default:
        for (size_t i = 0; i < n; i++)
            if (items[i]->role && (items[i]->role != ROLE_TRACES || !pairs || i % 2 == 0 || target != p->stream_root ||
                                   !is_str(items[i - 1], st->root_key)))
                return leave_stream(p);
        return 0;
    }
}

/* At STOP: the root is the dict the record lists were made in, they are its root_key's value, in the
 * order they were made, and every record was placed. */
static int stream_check(struct parser *p)
{
    if (p->doc->root != p->stream_root || pickle_dict_get(p->doc->root, p->stream->root_key) != p->traces ||
        p->traces->as.seq->len != p->nlists || p->lists_placed != p->nlists || p->records_placed != p->nrecords)
        return leave_stream(p);
    return 0;
}

/* Runs opcodes up to STOP and leaves the value it pops in doc->root. */
static int run(struct parser *p)
{
    while (p->pos < p->len) {
        if (memo_get_fast(p))
            continue;
        p->op_pos = p->pos;
        p->op = p->data[p->pos++];
        if (p->op == OP_STOP) {
            if (require(p, 1))
                return -1;
            p->doc->root = p->stack[--p->depth];
            if (index_big_dicts(p))
                return -1;
            return p->traces ? stream_check(p) : 0;
        }
        if (run_opcode(p))
            return -1;
    }
    return err_set(p->e, ERR_INPUT, "%s: truncated pickle at byte %zu (no STOP opcode)", p->name, p->len);
}

static int parse(const char *name, const unsigned char *data, size_t len, const struct pickle_stream *stream,
                 struct pickle_doc **out, struct err *e)
{
    *out = NULL;
    struct parser p = {.name = name, .data = data, .len = len, .e = e, .stream = stream};
    p.doc = calloc(1, sizeof *p.doc);
    if (!p.doc)
        return err_set(e, ERR_INTERNAL, "%s: out of memory reading the pickle", name);
    int rc = run(&p);
    free(p.stack);
    free(p.marks);
    free(p.memo);
    free(p.big_dicts);
    free(p.lists);
    if (rc) {
        pickle_free(p.doc);
        return -1;
    }
    *out = p.doc;
    return 0;
}

int pickle_parse(const char *name, const unsigned char *data, size_t len, struct pickle_doc **out, struct err *e)
{
    return parse(name, data, len, NULL, out, e);
}

int pickle_parse_streamed(const char *name, const unsigned char *data, size_t len, const struct pickle_stream *s,
                          struct pickle_doc **out)
{
    struct err ignored = {0}; /* the whole parse that follows says what is wrong */
    return parse(name, data, len, s, out, &ignored) ? 1 : 0;
}

bool pickle_streamed_list(const struct pickle_value *v, uintptr_t *token)
{
    if (v->role != ROLE_LIST)
        return false;
    *token = v->state == DONE ? (uintptr_t)v->as.bits : 0;
    return true;
}

/* ---- the value API ---- */

const struct pickle_value *pickle_root(const struct pickle_doc *doc)
{
    return doc->root;
}

enum pickle_type pickle_type(const struct pickle_value *v)
{
    return (enum pickle_type)v->type;
}

const char *pickle_type_name(enum pickle_type t)
{
    static const char *const names[] = {
        [PICKLE_NONE] = "None", [PICKLE_BOOL] = "bool",   [PICKLE_INT] = "int",
        [PICKLE_FLOAT] = "float", [PICKLE_STR] = "str",   [PICKLE_BYTES] = "bytes",
        [PICKLE_LIST] = "list", [PICKLE_TUPLE] = "tuple", [PICKLE_DICT] = "dict",
    };
    return names[t];
}

bool pickle_get_bool(const struct pickle_value *v, bool *out)
{
    if (v->type != PICKLE_BOOL)
        return false;
    *out = v->as.b;
    return true;
}

bool pickle_get_i64(const struct pickle_value *v, int64_t *out)
{
    if (v->type != PICKLE_INT || (!v->negative && v->as.bits > INT64_MAX))
        return false;
    *out = (int64_t)v->as.bits;
    return true;
}

bool pickle_get_u64(const struct pickle_value *v, uint64_t *out)
{
    if (v->type != PICKLE_INT || v->negative)
        return false;
    *out = v->as.bits;
    return true;
}

bool pickle_get_float(const struct pickle_value *v, double *out)
{
    if (v->type != PICKLE_FLOAT)
        return false;
    *out = v->as.f;
    return true;
}

const char *pickle_str(const struct pickle_value *v, size_t *len)
{
    if (v->type != PICKLE_STR)
        return NULL;
    if (len)
        *len = v->as.s->len;
    return v->as.s->data;
}

const unsigned char *pickle_bytes(const struct pickle_value *v, size_t *len)
{
    if (v->type != PICKLE_BYTES)
        return NULL;
    if (len)
        *len = v->as.s->len;
    return (const unsigned char *)v->as.s->data;
}

static bool is_container(const struct pickle_value *v)
{
    return v->type == PICKLE_LIST || v->type == PICKLE_TUPLE || v->type == PICKLE_DICT;
}

size_t pickle_len(const struct pickle_value *v)
{
    return is_container(v) ? v->as.seq->len : 0;
}

const struct pickle_value *pickle_item(const struct pickle_value *v, size_t i)
{
    if ((v->type != PICKLE_LIST && v->type != PICKLE_TUPLE) || i >= v->as.seq->len)
        return NULL;
    return v->as.seq->items[i];
}

const struct pickle_value *const *pickle_items(const struct pickle_value *v, size_t *n)
{
    bool seq = v->type == PICKLE_LIST || v->type == PICKLE_TUPLE;
    *n = seq ? v->as.seq->len : 0;
    return seq ? (const struct pickle_value *const *)v->as.seq->items : NULL;
}

const struct pickle_value *const *pickle_dict_pairs(const struct pickle_value *dict, size_t *npairs)
{
    bool is_dict = dict->type == PICKLE_DICT;
    *npairs = is_dict ? dict->as.seq->len : 0;
    return is_dict ? (const struct pickle_value *const *)dict->as.seq->items : NULL;
}

const struct pickle_value *pickle_dict_key(const struct pickle_value *dict, size_t i)
{
    if (dict->type != PICKLE_DICT || i >= dict->as.seq->len)
        return NULL;
    return dict->as.seq->items[2 * i];
}

const struct pickle_value *pickle_dict_value(const struct pickle_value *dict, size_t i)
{
    if (dict->type != PICKLE_DICT || i >= dict->as.seq->len)
        return NULL;
    return dict->as.seq->items[2 * i + 1];
}

const struct pickle_value *pickle_dict_get(const struct pickle_value *dict, const char *key)
{
    if (dict->type != PICKLE_DICT)
        return NULL;
    size_t klen = strlen(key);
    if (dict->as.seq->index)
        return indexed_get(dict->as.seq, key, klen);
    for (size_t i = dict->as.seq->len; i-- > 0;) {
        const struct pickle_value *k = dict->as.seq->items[2 * i];
        if (k->type == PICKLE_STR && k->as.s->len == klen && memcmp(k->as.s->data, key, klen) == 0)
            return dict->as.seq->items[2 * i + 1];
    }
    return NULL;
}
