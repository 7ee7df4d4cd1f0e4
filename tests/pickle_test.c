/* pickle_test.c: the pickle reader against hand-written byte strings, every supported opcode, memo
 * sharing, 64-bit integer limits, and bad input with its exact message. Byte strings marked "Python"
 * are what CPython 3.11's pickle.dumps emits for the object named beside them (checked once by hand;
 * the test itself needs no Python). Every parse is freed, so the sanitized build also proves no leak. */
#include <math.h>

#include "replay/pickle.h"
#include "tap.h"

/* A byte-string literal as (data, length), NUL terminator excluded. */
#define BYTES(lit) (const unsigned char *)(lit), sizeof(lit) - 1

static struct pickle_doc *parse(const unsigned char *data, size_t len)
{
    struct err e = {0};
    struct pickle_doc *doc;
    if (pickle_parse("t.pickle", data, len, &doc, &e)) {
        diag("unexpected error: %s", e.msg);
        return NULL;
    }
    return doc;
}

/* Parses input that must fail; returns the message in a static buffer. */
static const char *parse_error(const unsigned char *data, size_t len)
{
    static struct err e;
    struct pickle_doc *doc = (struct pickle_doc *)1;
    memset(&e, 0, sizeof e);
    if (pickle_parse("t.pickle", data, len, &doc, &e) == 0) {
        pickle_free(doc);
        return "(parsed without error)";
    }
    if (doc != NULL || e.code != ERR_INPUT)
        return "(failure left *out set or used another error code)";
    return e.msg;
}

static int64_t i64_of(const struct pickle_value *v)
{
    int64_t i = -12345;
    pickle_get_i64(v, &i);
    return i;
}

static const char *str_of(const struct pickle_value *v)
{
    const char *s = v ? pickle_str(v, NULL) : NULL;
    return s ? s : "(not a str)";
}

static void test_python_dict(void)
{
    /* Python, protocol 4: {'a': [1, 2, (3, 'x')], 'b': None} (PROTO, FRAME, MEMOIZE, SETITEMS, APPENDS, TUPLE2) */
    static const char p4[] = "\x80\x04\x95\x1e\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28"
                             "\x4b\x01\x4b\x02\x4b\x03\x8c\x01\x78\x94\x86\x94\x65\x8c\x01\x62\x94\x4e\x75\x2e";
    /* Python, protocol 2: the same dict (BINPUT, BINUNICODE) */
    static const char p2[] = "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4b"
                             "\x02\x4b\x03\x58\x01\x00\x00\x00\x78\x71\x03\x86\x71\x04\x65\x58\x01\x00\x00\x00\x62"
                             "\x71\x05\x4e\x75\x2e";
    const char *inputs[] = {p4, p2};
    size_t lens[] = {sizeof p4 - 1, sizeof p2 - 1};
    for (int k = 0; k < 2; k++) {
        struct pickle_doc *doc = parse((const unsigned char *)inputs[k], lens[k]);
        if (!ok(doc, "protocol %d dict parses", k ? 2 : 4))
            continue;
        const struct pickle_value *root = pickle_root(doc);
        is_int(pickle_type(root), PICKLE_DICT, "root is a dict");
        is_int(pickle_len(root), 2, "two keys");
        is_str(str_of(pickle_dict_key(root, 0)), "a", "first key in pickle order");
        const struct pickle_value *a = pickle_dict_get(root, "a");
        ok(a && pickle_type(a) == PICKLE_LIST && pickle_len(a) == 3, "'a' is a list of 3");
        is_int(i64_of(pickle_item(a, 0)), 1, "a[0]");
        is_int(i64_of(pickle_item(a, 1)), 2, "a[1]");
        const struct pickle_value *t = pickle_item(a, 2);
        ok(t && pickle_type(t) == PICKLE_TUPLE && pickle_len(t) == 2, "a[2] is a 2-tuple");
        is_int(i64_of(pickle_item(t, 0)), 3, "a[2][0]");
        is_str(str_of(pickle_item(t, 1)), "x", "a[2][1]");
        ok(pickle_type(pickle_dict_get(root, "b")) == PICKLE_NONE, "'b' is None");
        ok(pickle_dict_get(root, "c") == NULL, "missing key gives NULL");
        ok(pickle_item(a, 3) == NULL && pickle_dict_key(root, 2) == NULL, "out-of-range index gives NULL");
        pickle_free(doc);
    }
}

static void test_scalars(void)
{
    /* Python, protocol 3: [True, False, None, 1.5, -0.25, b'hi', ()] (NEWTRUE, NEWFALSE, BINFLOAT,
     * SHORT_BINBYTES, EMPTY_TUPLE, APPENDS) */
    struct pickle_doc *doc = parse(BYTES("\x80\x03\x5d\x71\x00\x28\x88\x89\x4e\x47\x3f\xf8\x00\x00\x00\x00\x00\x00"
                                         "\x47\xbf\xd0\x00\x00\x00\x00\x00\x00\x43\x02\x68\x69\x71\x01\x29\x65\x2e"));
    if (!ok(doc, "scalars parse"))
        return;
    const struct pickle_value *l = pickle_root(doc);
    bool b = false;
    double f = 0;
    size_t n = 0;
    ok(pickle_get_bool(pickle_item(l, 0), &b) && b, "True");
    ok(pickle_get_bool(pickle_item(l, 1), &b) && !b, "False");
    is_str(pickle_type_name(pickle_type(pickle_item(l, 2))), "None", "None");
    ok(pickle_get_float(pickle_item(l, 3), &f) && f == 1.5, "1.5");
    ok(pickle_get_float(pickle_item(l, 4), &f) && f == -0.25, "-0.25");
    const unsigned char *bytes = pickle_bytes(pickle_item(l, 5), &n);
    ok(bytes && n == 2 && memcmp(bytes, "hi", 2) == 0, "b'hi'");
    ok(pickle_type(pickle_item(l, 6)) == PICKLE_TUPLE && pickle_len(pickle_item(l, 6)) == 0, "()");
    int64_t i;
    ok(!pickle_get_i64(pickle_item(l, 0), &i), "a bool is not an int");
    ok(!pickle_get_bool(pickle_item(l, 2), &b) && !pickle_get_float(pickle_item(l, 0), &f), "typed getters refuse");
    ok(pickle_str(pickle_item(l, 5), NULL) == NULL && pickle_bytes(pickle_item(l, 2), NULL) == NULL,
       "bytes are not str and None is not bytes");
    pickle_free(doc);

    /* Python, protocol 4: 1e100 */
    doc = parse(BYTES("\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00\x47\x54\xb2\x49\xad\x25\x94\xc3\x7d\x2e"));
    ok(doc && pickle_get_float(pickle_root(doc), &f) && f == 1e100, "BINFLOAT 1e100");
    pickle_free(doc);
    doc = parse(BYTES("\x80\x04\x47\xff\xf0\x00\x00\x00\x00\x00\x00\x2e"));
    ok(doc && pickle_get_float(pickle_root(doc), &f) && isinf(f) && f < 0, "BINFLOAT -inf");
    pickle_free(doc);
}

static void test_strings(void)
{
    size_t n = 0;
    /* Python, protocol 4: 'ééé' (SHORT_BINUNICODE of 6 UTF-8 bytes) */
    struct pickle_doc *doc = parse(BYTES("\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00\x8c\x06\xc3\xa9\xc3\xa9\xc3\xa9\x94\x2e"));
    const char *s = doc ? pickle_str(pickle_root(doc), &n) : NULL;
    ok(s && n == 6 && strcmp(s, "\xc3\xa9\xc3\xa9\xc3\xa9") == 0, "SHORT_BINUNICODE keeps UTF-8 bytes");
    pickle_free(doc);

    doc = parse(BYTES("\x80\x04\x8d\x03\x00\x00\x00\x00\x00\x00\x00\x61\x00\x62\x2e"));
    s = doc ? pickle_str(pickle_root(doc), &n) : NULL;
    ok(s && n == 3 && memcmp(s, "a\0b", 4) == 0, "BINUNICODE8 with an embedded NUL, NUL-terminated");
    pickle_free(doc);

    doc = parse(BYTES("\x80\x03\x42\x03\x00\x00\x00\x61\x62\x63\x2e"));
    const unsigned char *b = doc ? pickle_bytes(pickle_root(doc), &n) : NULL;
    ok(b && n == 3 && memcmp(b, "abc", 3) == 0, "BINBYTES");
    pickle_free(doc);

    doc = parse(BYTES("\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x00\x2e"));
    b = doc ? pickle_bytes(pickle_root(doc), &n) : NULL;
    ok(b && n == 0, "BINBYTES8, empty");
    pickle_free(doc);

    doc = parse(BYTES("\x80\x02\x58\x00\x00\x00\x00\x2e"));
    s = doc ? pickle_str(pickle_root(doc), &n) : NULL;
    ok(s && n == 0 && *s == '\0', "BINUNICODE, empty");
    pickle_free(doc);
}

static void check_u64(const char *what, const unsigned char *data, size_t len, uint64_t want, bool fits_i64)
{
    struct pickle_doc *doc = parse(data, len);
    uint64_t u = 0;
    int64_t i = 0;
    ok(doc && pickle_get_u64(pickle_root(doc), &u) && u == want, "%s as uint64", what);
    ok(doc && pickle_get_i64(pickle_root(doc), &i) == fits_i64, "%s %s int64", what, fits_i64 ? "fits" : "exceeds");
    pickle_free(doc);
}

static void check_i64(const char *what, const unsigned char *data, size_t len, int64_t want)
{
    struct pickle_doc *doc = parse(data, len);
    int64_t i = 0;
    uint64_t u = 0;
    ok(doc && pickle_get_i64(pickle_root(doc), &i) && i == want, "%s as int64", what);
    if (want < 0)
        ok(doc && !pickle_get_u64(pickle_root(doc), &u), "%s refused as uint64", what);
    pickle_free(doc);
}

static void test_ints(void)
{
    /* Python, protocol 2, each value named */
    check_u64("BININT1 255", BYTES("\x80\x02\x4b\xff\x2e"), 255, true);
    check_u64("BININT2 65535", BYTES("\x80\x02\x4d\xff\xff\x2e"), 65535, true);
    check_u64("BININT 65536", BYTES("\x80\x02\x4a\x00\x00\x01\x00\x2e"), 65536, true);
    check_i64("BININT -1", BYTES("\x80\x02\x4a\xff\xff\xff\xff\x2e"), -1);
    check_i64("BININT -129", BYTES("\x80\x02\x4a\x7f\xff\xff\xff\x2e"), -129);
    check_i64("BININT -2^31", BYTES("\x80\x02\x4a\x00\x00\x00\x80\x2e"), INT32_MIN);
    check_u64("LONG1 2^31", BYTES("\x80\x02\x8a\x05\x00\x00\x00\x80\x00\x2e"), UINT64_C(2147483648), true);
    check_u64("LONG1 2^63-1 (8 bytes)", BYTES("\x80\x02\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x2e"), INT64_MAX, true);
    check_i64("LONG1 -2^63 (8 bytes)", BYTES("\x80\x02\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x2e"), INT64_MIN);
    check_u64("LONG1 2^64-1 (9 bytes)", BYTES("\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00\x2e"), UINT64_MAX,
              false);
    check_u64("LONG1 2^63", BYTES("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00\x2e"),
              UINT64_C(9223372036854775808), false);
    /* Hand-made: forms Python does not emit but the format allows */
    check_u64("LONG1 of 0 bytes is 0", BYTES("\x80\x02\x8a\x00\x2e"), 0, true);
    check_i64("LONG1 -1 padded to 10 bytes", BYTES("\x80\x02\x8a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x2e"), -1);
    check_i64("LONG1 -2 in 1 byte", BYTES("\x80\x02\x8a\x01\xfe\x2e"), -2);
    check_u64("LONG4 12345", BYTES("\x80\x02\x8b\x02\x00\x00\x00\x39\x30\x2e"), 12345, true);
    check_i64("LONG4 -300", BYTES("\x80\x02\x8b\x02\x00\x00\x00\xd4\xfe\x2e"), -300);

    /* Python, protocol 2: 2^64, -2^63-1; and 2^2400 as LONG4 */
    is_str(parse_error(BYTES("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01\x2e")),
           "t.pickle: byte 2: integer does not fit in 64 bits (LONG1 of 9 bytes): oomlab reads ints from -2^63 to "
           "2^64-1",
           "2^64 is rejected");
    is_str(parse_error(BYTES("\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\xff\x2e")),
           "t.pickle: byte 2: integer does not fit in 64 bits (LONG1 of 9 bytes): oomlab reads ints from -2^63 to "
           "2^64-1",
           "-2^63-1 is rejected");
    unsigned char huge[2 + 5 + 301 + 1] = {0x80, 0x02, 0x8b, 0x2d, 0x01, 0x00, 0x00};
    huge[2 + 5 + 300] = 0x01;
    huge[sizeof huge - 1] = 0x2e;
    is_str(parse_error(huge, sizeof huge),
           "t.pickle: byte 2: integer does not fit in 64 bits (LONG4 of 301 bytes): oomlab reads ints from -2^63 to "
           "2^64-1",
           "2^2400 (LONG4) is rejected");
}

static void test_containers(void)
{
    /* hand-made: MARK 'k' 1 'k' 2 DICT (duplicate key: lookup sees the later value) */
    struct pickle_doc *doc = parse(BYTES("\x80\x02\x28\x8c\x01\x6b\x4b\x01\x8c\x01\x6b\x4b\x02\x64\x2e"));
    const struct pickle_value *d = doc ? pickle_root(doc) : NULL;
    ok(d && pickle_type(d) == PICKLE_DICT && pickle_len(d) == 2, "DICT from MARK");
    ok(d && i64_of(pickle_dict_get(d, "k")) == 2, "a key set twice reads as its later value");
    pickle_free(doc);

    /* EMPTY_DICT, int key 7 -> 'x' by SETITEM, 'y' -> None by SETITEM */
    doc = parse(BYTES("\x80\x02\x7d\x4b\x07\x8c\x01\x78\x73\x8c\x01\x79\x4e\x73\x2e"));
    d = doc ? pickle_root(doc) : NULL;
    ok(d && pickle_len(d) == 2, "SETITEM twice");
    ok(d && i64_of(pickle_dict_key(d, 0)) == 7 && strcmp(str_of(pickle_dict_value(d, 0)), "x") == 0,
       "an int key is kept");
    ok(d && pickle_dict_get(d, "y") && pickle_type(pickle_dict_get(d, "y")) == PICKLE_NONE, "str key after it");
    pickle_free(doc);

    /* MARK 1 2 LIST; EMPTY_LIST 3 APPEND; TUPLE1 of both; then TUPLE from MARK */
    doc = parse(BYTES("\x80\x02\x28\x28\x4b\x01\x4b\x02\x6c\x5d\x4b\x03\x61\x74\x2e"));
    const struct pickle_value *t = doc ? pickle_root(doc) : NULL;
    ok(t && pickle_type(t) == PICKLE_TUPLE && pickle_len(t) == 2, "TUPLE from MARK");
    ok(t && pickle_len(pickle_item(t, 0)) == 2 && i64_of(pickle_item(pickle_item(t, 0), 1)) == 2, "LIST from MARK");
    ok(t && pickle_len(pickle_item(t, 1)) == 1 && i64_of(pickle_item(pickle_item(t, 1), 0)) == 3, "APPEND");
    pickle_free(doc);

    /* Python: (1,) protocol 2 (TUPLE1) and (1, 2, 3) protocol 5 (TUPLE3) */
    doc = parse(BYTES("\x80\x02\x4b\x01\x85\x71\x00\x2e"));
    ok(doc && pickle_len(pickle_root(doc)) == 1 && i64_of(pickle_item(pickle_root(doc), 0)) == 1, "TUPLE1");
    pickle_free(doc);
    doc = parse(BYTES("\x80\x05\x95\x09\x00\x00\x00\x00\x00\x00\x00\x4b\x01\x4b\x02\x4b\x03\x87\x94\x2e"));
    ok(doc && pickle_len(pickle_root(doc)) == 3 && i64_of(pickle_item(pickle_root(doc), 2)) == 3, "TUPLE3, protocol 5");
    pickle_free(doc);

    /* a list longer than one APPENDS batch: EMPTY_LIST, then 3 batches of MARK + 700 ints + APPENDS */
    enum { BATCH = 700, BATCHES = 3 };
    unsigned char big[3 + BATCHES * (2 + 3 * BATCH) + 1] = {0x80, 0x04, 0x5d};
    size_t at = 3;
    for (int b = 0; b < BATCHES; b++) {
        big[at++] = 0x28;
        for (int i = 0; i < BATCH; i++) {
            int v = b * BATCH + i;
            big[at++] = 0x4d;
            big[at++] = (unsigned char)(v & 0xff);
            big[at++] = (unsigned char)(v >> 8);
        }
        big[at++] = 0x65;
    }
    big[at++] = 0x2e;
    doc = parse(big, at);
    const struct pickle_value *l = doc ? pickle_root(doc) : NULL;
    ok(l && pickle_len(l) == BATCH * BATCHES, "APPENDS in three batches: %d items", BATCH * BATCHES);
    ok(l && i64_of(pickle_item(l, 0)) == 0 && i64_of(pickle_item(l, BATCH)) == BATCH &&
           i64_of(pickle_item(l, BATCH * BATCHES - 1)) == BATCH * BATCHES - 1,
       "items keep their order across batches");
    pickle_free(doc);
}

static void test_nested(void)
{
    /* Python, protocol 4: {'a': {'b': [{'c': (1, [2])}]}} */
    struct pickle_doc *doc = parse(BYTES("\x80\x04\x95\x22\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x8c\x01\x61\x94\x7d"
                                         "\x94\x8c\x01\x62\x94\x5d\x94\x7d\x94\x8c\x01\x63\x94\x4b\x01\x5d\x94\x4b\x02"
                                         "\x61\x86\x94\x73\x61\x73\x73\x2e"));
    const struct pickle_value *v = doc ? pickle_root(doc) : NULL;
    v = v ? pickle_dict_get(v, "a") : NULL;
    v = v ? pickle_dict_get(v, "b") : NULL;
    v = v ? pickle_item(v, 0) : NULL;
    v = v ? pickle_dict_get(v, "c") : NULL;
    ok(v && pickle_type(v) == PICKLE_TUPLE, "a.b[0].c is a tuple");
    v = v ? pickle_item(v, 1) : NULL;
    ok(v && pickle_type(v) == PICKLE_LIST && i64_of(pickle_item(v, 0)) == 2, "a.b[0].c[1] == [2]");
    pickle_free(doc);
}

static void test_memo(void)
{
    /* Python: x = [1]; [x, x] in protocol 4 (MEMOIZE, BINGET) and 2 (BINPUT, BINGET) */
    struct pickle_doc *doc = parse(BYTES("\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x5d\x94\x4b\x01"
                                         "\x61\x68\x01\x65\x2e"));
    const struct pickle_value *l = doc ? pickle_root(doc) : NULL;
    ok(l && pickle_len(l) == 2 && pickle_item(l, 0) == pickle_item(l, 1), "MEMOIZE/BINGET share one value");
    ok(l && pickle_len(pickle_item(l, 1)) == 1, "the shared list holds its item");
    pickle_free(doc);
    doc = parse(BYTES("\x80\x02\x5d\x71\x00\x28\x5d\x71\x01\x4b\x01\x61\x68\x01\x65\x2e"));
    l = doc ? pickle_root(doc) : NULL;
    ok(l && pickle_len(l) == 2 && pickle_item(l, 0) == pickle_item(l, 1), "BINPUT/BINGET share one value");
    pickle_free(doc);

    /* MARK, EMPTY_LIST, MEMOIZE, BINGET 0, 1, APPEND (to the shared list), TUPLE: (l, l) with l == [1] */
    doc = parse(BYTES("\x80\x04\x28\x5d\x94\x68\x00\x4b\x01\x61\x74\x2e"));
    const struct pickle_value *t = doc ? pickle_root(doc) : NULL;
    ok(t && pickle_item(t, 0) == pickle_item(t, 1) && pickle_len(pickle_item(t, 0)) == 1,
       "appending through a memo copy changes the one list");
    pickle_free(doc);

    /* MARK, None, LONG_BINPUT 7, LONG_BINGET 7, TUPLE */
    doc = parse(BYTES("\x80\x02\x28\x4e\x72\x07\x00\x00\x00\x6a\x07\x00\x00\x00\x74\x2e"));
    t = doc ? pickle_root(doc) : NULL;
    ok(t && pickle_len(t) == 2 && pickle_item(t, 0) == pickle_item(t, 1), "LONG_BINPUT/LONG_BINGET");
    pickle_free(doc);

    /* None, PUT "12\n", GET "12\n", TUPLE2 (the text forms) */
    doc = parse(BYTES("\x80\x02\x4e\x70\x31\x32\x0a\x67\x31\x32\x0a\x86\x2e"));
    t = doc ? pickle_root(doc) : NULL;
    ok(t && pickle_len(t) == 2 && pickle_item(t, 0) == pickle_item(t, 1), "PUT/GET text forms");
    pickle_free(doc);

    /* PUT 3 then MEMOIZE: MEMOIZE stores under len(memo) == 1, so BINGET 1 finds 'b' */
    doc = parse(BYTES("\x80\x04\x28\x8c\x01\x61\x71\x03\x8c\x01\x62\x94\x68\x01\x68\x03\x74\x2e"));
    t = doc ? pickle_root(doc) : NULL;
    ok(t && pickle_len(t) == 4 && strcmp(str_of(pickle_item(t, 2)), "b") == 0 &&
           strcmp(str_of(pickle_item(t, 3)), "a") == 0,
       "MEMOIZE after a sparse PUT uses len(memo)");
    pickle_free(doc);
}

static void test_protocols(void)
{
    for (unsigned char v = 2; v <= 5; v++) {
        unsigned char b[] = {0x80, v, 0x4e, 0x2e};
        struct pickle_doc *doc = parse(b, sizeof b);
        ok(doc && pickle_type(pickle_root(doc)) == PICKLE_NONE, "PROTO %u", v);
        pickle_free(doc);
    }
    is_str(parse_error(BYTES("\x80\x06\x4e\x2e")), "t.pickle: byte 0: unsupported pickle protocol 6 (the highest is 5)",
           "PROTO 6");
    struct pickle_doc *doc = parse(BYTES("\x80\x02\x4b\x05\x2e\xff\xff"));
    ok(doc && i64_of(pickle_root(doc)) == 5, "bytes after STOP are ignored");
    pickle_free(doc);
}

static void test_truncated(void)
{
    /* Python, protocol 2: {'a': [1, 2, (3, 'x')], 'b': None} */
    static const char p2[] = "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4b"
                             "\x02\x4b\x03\x58\x01\x00\x00\x00\x78\x71\x03\x86\x71\x04\x65\x58\x01\x00\x00\x00\x62"
                             "\x71\x05\x4e\x75\x2e";
    const unsigned char *b = (const unsigned char *)p2;
    is_str(parse_error(b, 0), "t.pickle: truncated pickle at byte 0 (no STOP opcode)", "empty input");
    is_str(parse_error(b, 1), "t.pickle: truncated pickle at byte 1 (PROTO at byte 0 needs 1 byte, 0 left)",
           "cut inside PROTO");
    is_str(parse_error(b, 4), "t.pickle: truncated pickle at byte 4 (BINPUT at byte 3 needs 1 byte, 0 left)",
           "cut inside BINPUT");
    is_str(parse_error(b, 9), "t.pickle: truncated pickle at byte 9 (BINUNICODE at byte 6 needs 4 bytes, 2 left)",
           "cut inside a string length");
    is_str(parse_error(b, 11), "t.pickle: truncated pickle at byte 11 (BINUNICODE at byte 6 needs 1 byte, 0 left)",
           "cut before a string's text");
    is_str(parse_error(b, 19), "t.pickle: truncated pickle at byte 19 (BININT1 at byte 18 needs 1 byte, 0 left)",
           "cut inside BININT1");
    is_str(parse_error(b, sizeof p2 - 2), "t.pickle: truncated pickle at byte 46 (no STOP opcode)", "cut before STOP");
    int all = 1;
    for (size_t n = 0; n + 1 < sizeof p2; n++)
        all &= strstr(parse_error(b, n), "truncated pickle at byte") != NULL;
    ok(all, "every proper prefix is reported truncated");

    /* Python, protocol 4: the same dict; the frame announces 30 bytes */
    static const char p4[] = "\x80\x04\x95\x1e\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28"
                             "\x4b\x01\x4b\x02\x4b\x03\x8c\x01\x78\x94\x86\x94\x65\x8c\x01\x62\x94\x4e\x75\x2e";
    is_str(parse_error((const unsigned char *)p4, 6),
           "t.pickle: truncated pickle at byte 6 (FRAME at byte 2 needs 8 bytes, 3 left)", "cut inside FRAME's size");
    is_str(parse_error((const unsigned char *)p4, 20),
           "t.pickle: truncated pickle at byte 20 (FRAME at byte 2 needs 30 bytes, 9 left)", "cut inside a frame");
    is_str(parse_error(BYTES("\x80\x04\x8d\x03\x00\x00\x00\x00\x00\x00\x00\x61\x2e")),
           "t.pickle: truncated pickle at byte 13 (BINUNICODE8 at byte 2 needs 3 bytes, 2 left)",
           "string longer than the data");
    is_str(parse_error(BYTES("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\xff\x2e")),
           "t.pickle: truncated pickle at byte 12 (BINBYTES8 at byte 2 needs 18446744073709551615 bytes, 1 left)",
           "a 2^64-1 byte length is truncation, not an allocation");
    is_str(parse_error(BYTES("\x80\x02\x4e\x70\x31\x32")),
           "t.pickle: truncated pickle at byte 6 (PUT at byte 3 has no ending newline)", "PUT without newline");
}

static void test_unsupported(void)
{
    /* Python, protocol 4: collections.OrderedDict() */
    is_str(parse_error(BYTES("\x80\x04\x95\x22\x00\x00\x00\x00\x00\x00\x00\x8c\x0b\x63\x6f\x6c\x6c\x65\x63\x74\x69"
                             "\x6f\x6e\x73\x94\x8c\x0b\x4f\x72\x64\x65\x72\x65\x64\x44\x69\x63\x74\x94\x93\x94\x29\x52"
                             "\x94\x2e")),
           "t.pickle: byte 39: unsupported pickle opcode 0x93 (STACK_GLOBAL): oomlab reads only dicts, lists, tuples, "
           "strings, bytes, ints, floats, bools and None",
           "STACK_GLOBAL");
    /* protocol 2 style: GLOBAL 'collections\nOrderedDict\n' */
    is_str(parse_error(BYTES("\x80\x02\x63\x63\x6f\x6c\x6c\x65\x63\x74\x69\x6f\x6e\x73\x0a\x4f\x0a\x2e")),
           "t.pickle: byte 2: unsupported pickle opcode 0x63 (GLOBAL): oomlab reads only dicts, lists, tuples, "
           "strings, bytes, ints, floats, bools and None",
           "GLOBAL");
    is_str(parse_error(BYTES("\x80\x02\x4e\x29\x52\x2e")),
           "t.pickle: byte 4: unsupported pickle opcode 0x52 (REDUCE): oomlab reads only dicts, lists, tuples, "
           "strings, bytes, ints, floats, bools and None",
           "REDUCE");
    /* Python, protocol 4: set() */
    is_str(parse_error(BYTES("\x80\x04\x8f\x94\x2e")),
           "t.pickle: byte 2: unsupported pickle opcode 0x8f (EMPTY_SET): oomlab reads only dicts, lists, tuples, "
           "strings, bytes, ints, floats, bools and None",
           "EMPTY_SET");
    is_str(parse_error(BYTES("\x80\x02\x4e\x62\x2e")),
           "t.pickle: byte 3: unsupported pickle opcode 0x62 (BUILD): oomlab reads only dicts, lists, tuples, "
           "strings, bytes, ints, floats, bools and None",
           "BUILD");
    is_str(parse_error(BYTES("PK\x03\x04")),
           "t.pickle: byte 0: unsupported pickle opcode 0x50 (PERSID): oomlab reads only dicts, lists, tuples, "
           "strings, bytes, ints, floats, bools and None",
           "a torch.save zip starts with PERSID");
    is_str(parse_error(BYTES("\x80\x02\xff\x2e")),
           "t.pickle: byte 2: invalid pickle opcode 0xff (not a pickle, or a corrupt one)", "a byte that is no opcode");
}

static void test_malformed(void)
{
    is_str(parse_error(BYTES("\x80\x02\x2e")),
           "t.pickle: byte 2: malformed pickle: STOP needs 1 value on the stack, found 0", "STOP on an empty stack");
    is_str(parse_error(BYTES("\x80\x02\x4e\x65\x2e")), "t.pickle: byte 3: malformed pickle: APPENDS without a preceding MARK",
           "APPENDS without MARK");
    is_str(parse_error(BYTES("\x80\x02\x28\x4e\x65\x2e")),
           "t.pickle: byte 4: malformed pickle: APPENDS has no list below its MARK", "APPENDS with nothing below");
    is_str(parse_error(BYTES("\x80\x02\x7d\x28\x4e\x65\x2e")),
           "t.pickle: byte 5: malformed pickle: APPENDS on a dict, expected a list", "APPENDS to a dict");
    is_str(parse_error(BYTES("\x80\x02\x7d\x4e\x61\x2e")),
           "t.pickle: byte 4: malformed pickle: APPEND to a dict, expected a list", "APPEND to a dict");
    is_str(parse_error(BYTES("\x80\x02\x5d\x4e\x4e\x73\x2e")),
           "t.pickle: byte 5: malformed pickle: SETITEM on a list, expected a dict", "SETITEM on a list");
    is_str(parse_error(BYTES("\x80\x02\x7d\x28\x4e\x75\x2e")),
           "t.pickle: byte 5: malformed pickle: SETITEMS has an odd number of values after its MARK",
           "SETITEMS with an odd count");
    is_str(parse_error(BYTES("\x80\x02\x28\x4e\x64\x2e")),
           "t.pickle: byte 4: malformed pickle: DICT has an odd number of values after its MARK", "DICT with an odd count");
    is_str(parse_error(BYTES("\x80\x02\x4e\x28\x4e\x61\x2e")),
           "t.pickle: byte 5: malformed pickle: APPEND needs 2 values on the stack, found 1",
           "a MARK hides the values below it");
    is_str(parse_error(BYTES("\x80\x02\x4e\x86\x2e")),
           "t.pickle: byte 3: malformed pickle: TUPLE2 needs 2 values on the stack, found 1", "TUPLE2 with one value");
    is_str(parse_error(BYTES("\x80\x02\x68\x04\x2e")),
           "t.pickle: byte 2: malformed pickle: BINGET of memo index 4, which was never stored", "BINGET of nothing");
    is_str(parse_error(BYTES("\x80\x02\x94\x2e")),
           "t.pickle: byte 2: malformed pickle: MEMOIZE needs 1 value on the stack, found 0", "MEMOIZE on empty stack");
    is_str(parse_error(BYTES("\x80\x02\x4e\x72\xff\xff\xff\xff\x2e")),
           "t.pickle: byte 3: malformed pickle: LONG_BINPUT index 4294967295 is out of range",
           "a huge memo index is refused, not allocated");
    is_str(parse_error(BYTES("\x80\x02\x4e\x70\x31\x78\x0a\x2e")),
           "t.pickle: byte 3: malformed pickle: PUT has an argument that is not a memo index", "PUT with letters");
    is_str(parse_error(BYTES("\x80\x02\x8b\x00\x00\x00\x80\x2e")),
           "t.pickle: byte 2: malformed pickle: LONG4 has a negative byte count", "LONG4 with a negative count");
}

/* Dicts past 16 keys are looked up through a sorted index: the last of a repeated key wins, as in
 * Python, keys that differ only in length or in one byte are told apart, and non-str keys are
 * skipped; below 16 keys the same answers come from a scan. */
static void test_dict_index(void)
{
    for (int nkeys = 4; nkeys <= 40; nkeys += 36) {
        unsigned char buf[4096];
        size_t n = 0;
        buf[n++] = 0x80, buf[n++] = 2, buf[n++] = '}', buf[n++] = '(';
        for (int i = 0; i < nkeys; i++) { /* 'k0': 0, 'k1': 1, ... */
            char k[8];
            int len = snprintf(k, sizeof k, "k%d", i);
            buf[n++] = 0x8c, buf[n++] = (unsigned char)len;
            memcpy(buf + n, k, (size_t)len), n += (size_t)len;
            buf[n++] = 'K', buf[n++] = (unsigned char)i;
        }
        const unsigned char tail[] = {0x8c, 2, 'k', '1', 'K', 200,  /* 'k1' again: 200 */
                                      'K', 7, 'K', 77,              /* the int key 7 */
                                      0x8c, 1, 'k', 'K', 99,        /* 'k', shorter than every other key */
                                      'u', '.'};
        memcpy(buf + n, tail, sizeof tail), n += sizeof tail;
        struct pickle_doc *doc = parse(buf, n);
        if (!ok(doc, "a dict of %d str keys parses", nkeys))
            continue;
        const struct pickle_value *d = pickle_root(doc);
        is_int(pickle_len(d), nkeys + 3, "%d keys: every pair is kept, in order", nkeys);
        is_int(i64_of(pickle_dict_get(d, "k1")), 200, "%d keys: a repeated key reads its last value", nkeys);
        is_int(i64_of(pickle_dict_get(d, "k0")), 0, "%d keys: the first key", nkeys);
        is_int(i64_of(pickle_dict_get(d, "k3")), 3, "%d keys: another", nkeys);
        is_int(i64_of(pickle_dict_get(d, "k")), 99, "%d keys: a shorter key", nkeys);
        ok(!pickle_dict_get(d, "7"), "%d keys: the int key 7 is not the str '7'", nkeys);
        ok(!pickle_dict_get(d, "k999") && !pickle_dict_get(d, "") && !pickle_dict_get(d, "z"),
           "%d keys: missing keys give NULL", nkeys);
        if (nkeys > 16)
            is_int(i64_of(pickle_dict_get(d, "k39")), 39, "%d keys: the last key", nkeys);
        pickle_free(doc);
    }
}

/* A MARK closed before anything was ever pushed: the empty stack is a NULL array, and the reader must
 * not compute NULL + 0 (undefined; clang's UBSan, as in the fuzz build, reports it). */
static void test_mark_on_empty_stack(void)
{
    static const unsigned char empty_list[] = "\x80\x02(l.", empty_tuple[] = "(t.";
    struct pickle_doc *doc = parse(empty_list, sizeof empty_list - 1);
    ok(doc && pickle_type(pickle_root(doc)) == PICKLE_LIST && pickle_len(pickle_root(doc)) == 0,
       "MARK LIST on an empty stack is an empty list");
    pickle_free(doc);
    doc = parse(empty_tuple, sizeof empty_tuple - 1);
    ok(doc && pickle_type(pickle_root(doc)) == PICKLE_TUPLE && pickle_len(pickle_root(doc)) == 0,
       "MARK TUPLE on an empty stack is an empty tuple");
    pickle_free(doc);
}

int main(void)
{
    test_python_dict();
    test_scalars();
    test_strings();
    test_ints();
    test_containers();
    test_nested();
    test_memo();
    test_protocols();
    test_truncated();
    test_unsupported();
    test_malformed();
    test_dict_index();
    test_mark_on_empty_stack();
    return done_testing();
}
