/* pickle_out.c: a protocol-2 pickle writer (see pickle_out.h). */
#include "report/pickle_out.h"

#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

struct memo_entry {
    uint32_t index;
    UT_hash_handle hh;
    char text[];
};

struct pickle_out {
    FILE *f;
    struct memo_entry *memo;
    uint32_t next_index;
    bool failed;
};

static void bytes(struct pickle_out *p, const void *data, size_t n)
{
    if (fwrite(data, 1, n, p->f) != n)
        p->failed = true;
}

static void op(struct pickle_out *p, unsigned char code)
{
    bytes(p, &code, 1);
}

static void le32(struct pickle_out *p, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    bytes(p, b, 4);
}

struct pickle_out *pickle_out_create(FILE *f)
{
    struct pickle_out *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->f = f;
    op(p, 0x80); /* PROTO 2 */
    op(p, 2);
    return p;
}

int pickle_out_finish(struct pickle_out *p)
{
    op(p, '.'); /* STOP */
    return p->failed ? -1 : 0;
}

void pickle_out_destroy(struct pickle_out *p)
{
    if (!p)
        return;
    struct memo_entry *m, *tmp;
    HASH_ITER(hh, p->memo, m, tmp) {
        HASH_DEL(p->memo, m);
        free(m);
    }
    free(p);
}

void po_dict_begin(struct pickle_out *p)
{
    op(p, '}'); /* EMPTY_DICT */
    op(p, '('); /* MARK */
}

void po_dict_end(struct pickle_out *p)
{
    op(p, 'u'); /* SETITEMS */
}

void po_list_begin(struct pickle_out *p)
{
    op(p, ']'); /* EMPTY_LIST */
    op(p, '(');
}

void po_list_end(struct pickle_out *p)
{
    op(p, 'e'); /* APPENDS */
}

void po_tuple_begin(struct pickle_out *p)
{
    op(p, '(');
}

void po_tuple_end(struct pickle_out *p)
{
    op(p, 't'); /* TUPLE */
}

static void memo_ref(struct pickle_out *p, unsigned char short_op, unsigned char long_op, uint32_t index)
{
    if (index < 256) {
        unsigned char b[2] = {short_op, (unsigned char)index};
        bytes(p, b, 2);
    } else {
        op(p, long_op);
        le32(p, index);
    }
}

void po_str(struct pickle_out *p, const char *s)
{
    size_t n = strlen(s);
    struct memo_entry *m;
    HASH_FIND(hh, p->memo, s, n, m);
    if (m) {
        memo_ref(p, 'h', 'j', m->index); /* BINGET, LONG_BINGET */
        return;
    }
    op(p, 'X'); /* BINUNICODE */
    le32(p, (uint32_t)n);
    bytes(p, s, n);
    if (!(m = malloc(sizeof *m + n + 1))) {
        p->failed = true;
        return;
    }
    memcpy(m->text, s, n + 1);
    m->index = p->next_index++;
    HASH_ADD_KEYPTR(hh, p->memo, m->text, n, m);
    if (!HASH_ADDED(m)) {
        free(m);
        p->failed = true;
        return;
    }
    memo_ref(p, 'q', 'r', m->index); /* BINPUT, LONG_BINPUT */
}

void po_int(struct pickle_out *p, int64_t v)
{
    if (v >= 0 && v < 256) {
        unsigned char b[2] = {'K', (unsigned char)v}; /* BININT1 */
        bytes(p, b, 2);
    } else if (v >= 0 && v < 65536) {
        unsigned char b[3] = {'M', (unsigned char)v, (unsigned char)(v >> 8)}; /* BININT2 */
        bytes(p, b, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        op(p, 'J'); /* BININT */
        le32(p, (uint32_t)(int32_t)v);
    } else {
        unsigned char b[10] = {0x8a, 8}; /* LONG1, 8 bytes two's complement */
        for (int i = 0; i < 8; i++)
            b[2 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        bytes(p, b, 10);
    }
}

void po_uint(struct pickle_out *p, uint64_t v)
{
    if (v <= INT64_MAX) {
        po_int(p, (int64_t)v);
        return;
    }
    unsigned char b[11] = {0x8a, 9}; /* LONG1: a ninth byte keeps it positive */
    for (int i = 0; i < 8; i++)
        b[2 + i] = (unsigned char)(v >> (8 * i));
    b[10] = 0;
    bytes(p, b, 11);
}

void po_float(struct pickle_out *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    unsigned char b[9] = {'G'}; /* BINFLOAT, big-endian */
    for (int i = 0; i < 8; i++)
        b[1 + i] = (unsigned char)(u >> (56 - 8 * i));
    bytes(p, b, 9);
}

void po_bool(struct pickle_out *p, bool v)
{
    op(p, v ? 0x88 : 0x89); /* NEWTRUE, NEWFALSE */
}

void po_none(struct pickle_out *p)
{
    op(p, 'N');
}
