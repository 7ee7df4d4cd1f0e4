/* scenario_keytable_test.c: the generic key-table mapper on a small table of every key type:
 * values land at their offsets, ranges and types are enforced, errors carry file:line:col. */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "scenario/keytable.h"
#include "tap.h"

enum colour { RED, GREEN, BLUE, COLOUR_COUNT };
static const char *colour_at(int i) { return (const char *[]){"red", "green", "blue"}[i]; }

struct inner {
    int depth;
};

struct sample {
    int count;
    uint32_t flags;
    int64_t big;
    uint64_t bytes;
    double ratio;
    float prob;
    bool on;
    enum colour colour;
    char label[8];
    int levels[3];
    int nlevels;
    struct inner inner;
    int custom_calls;
};

static int parse_twice(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    (*(int *)field)++;
    return 0;
}

#define FIELD(m) .offset = offsetof(struct sample, m), .size = sizeof(((struct sample *)0)->m)

static const struct key inner_keys[] = {
    {.name = "depth", .type = KEY_INT, .offset = offsetof(struct inner, depth), .size = sizeof(int), .imin = 0,
     .imax = 9, .help = "Depth."},
};
static const struct key_table inner_table = {
    .name = "sample.inner", .help = "Inner.", .keys = inner_keys, .nkeys = 1, .obj_size = sizeof(struct inner)};

static const struct key sample_keys[] = {
    {.name = "count", .type = KEY_INT, FIELD(count), .imin = 1, .imax = 100, .required = true, .help = "Count."},
    {.name = "flags", .type = KEY_UINT, FIELD(flags), .imin = 0, .imax = UINT32_MAX, .help = "Flags."},
    {.name = "big", .type = KEY_INT, FIELD(big), .imin = -10000000000LL, .imax = LLONG_MAX, .help = "Big."},
    {.name = "bytes", .type = KEY_SIZE, FIELD(bytes), .zero_means = "unset", .help = "Bytes."},
    {.name = "ratio", .type = KEY_FLOAT, FIELD(ratio), .fmin = 0, .fmax = 1, .help = "Ratio."},
    {.name = "prob", .type = KEY_FLOAT, FIELD(prob), .fmin = 0, .fmax = 1, .help = "Prob."},
    {.name = "on", .type = KEY_BOOL, FIELD(on), .help = "On."},
    {.name = "colour", .type = KEY_ENUM, FIELD(colour), .name_of = colour_at, .nnames = COLOUR_COUNT, .help = "C."},
    {.name = "label", .type = KEY_STRING, FIELD(label), .help = "Label."},
    {.name = "levels", .type = KEY_INT_LIST, FIELD(levels), .count_offset = offsetof(struct sample, nlevels),
     .imin = 1, .imax = 64, .help = "Levels."},
    {.name = "inner", .type = KEY_TABLE, FIELD(inner), .sub = &inner_table, .help = "Inner."},
    {.name = "custom", .type = KEY_CUSTOM, FIELD(custom_calls), .parse = parse_twice, .doc_type = "anything",
     .help = "Custom."},
};
static const struct key_table sample_table = {.name = "sample", .help = "A sample.", .keys = sample_keys,
                                              .nkeys = sizeof sample_keys / sizeof sample_keys[0],
                                              .obj_size = sizeof(struct sample)};

static char tmp_path[64];

/* Writes `yaml` to a temporary file and applies the sample table; returns the apply result. */
static int load(const char *yaml, struct sample *s, struct err *e)
{
    snprintf(tmp_path, sizeof tmp_path, "/tmp/oomlab-keytable-XXXXXX");
    int fd = mkstemp(tmp_path);
    if (fd < 0 || write(fd, yaml, strlen(yaml)) != (ssize_t)strlen(yaml))
        return err_set(e, ERR_INTERNAL, "cannot write a temporary file");
    close(fd);
    memset(s, 0, sizeof *s);
    memset(e, 0, sizeof *e);
    struct yaml_doc d;
    int rc = yaml_doc_load(&d, tmp_path, e);
    if (rc == 0) {
        struct key_ctx c = {&d, s, "sample"};
        rc = keytable_apply(&sample_table, &c, yaml_doc_root(&d), s, e);
        yaml_doc_free(&d);
    }
    unlink(tmp_path);
    return rc;
}

/* The message without the temporary file's name. */
static const char *msg_after_path(const struct err *e)
{
    size_t n = strlen(tmp_path);
    return strncmp(e->msg, tmp_path, n) == 0 ? e->msg + n : e->msg;
}

static void bad(const char *yaml, const char *want)
{
    struct sample s;
    struct err e;
    int rc = load(yaml, &s, &e);
    is_int(rc, -1, "rejected: %s", want);
    is_int(e.code, ERR_INPUT, "  as bad input");
    is_str(msg_after_path(&e), want, "  message");
}

int main(void)
{
    struct sample s;
    struct err e;
    int rc = load("count: 7\nflags: 4294967295\nbig: -9000000000\nbytes: 1.5GiB\nratio: 0.25\nprob: 0.5\n"
                  "on: true\ncolour: blue\nlabel: abc\nlevels: [1, 2, 64]\ninner: {depth: 3}\ncustom: [x]\n",
                  &s, &e);
    is_int(rc, 0, "every key type loads");
    if (rc)
        diag("%s", e.msg);
    is_int(s.count, 7, "int");
    is_u64(s.flags, 4294967295u, "unsigned int at its maximum");
    is_int(s.big, -9000000000LL, "int64");
    is_u64(s.bytes, 1610612736ULL, "size with a unit");
    ok(s.ratio == 0.25, "double");
    ok(s.prob == 0.5f, "float");
    ok(s.on, "bool");
    is_int(s.colour, BLUE, "enum");
    is_str(s.label, "abc", "string");
    is_int(s.nlevels, 3, "list count");
    is_int(s.levels[2], 64, "list value");
    is_int(s.inner.depth, 3, "nested table");
    is_int(s.custom_calls, 1, "custom parser called once");

    rc = load("count: 1\nlabel:\nbytes: 512\n", &s, &e);
    is_int(rc, 0, "a key with no value is an empty string; a size without a unit is bytes");
    is_str(s.label, "", "empty string");
    is_u64(s.bytes, 512, "plain bytes");

    bad("count: 0\n", ":1:8: sample.count must be from 1 to 100, got 0");
    bad("count: 101\n", ":1:8: sample.count must be from 1 to 100, got 101");
    bad("count: eight\n", ":1:8: sample.count must be an integer, got 'eight'");
    bad("count: \"8\"\n", ":1:8: sample.count must be an integer, got '8' (quoted, so a string)");
    bad("count: 2.5\n", ":1:8: sample.count must be an integer, got '2.5'");
    bad("count: [1]\n", ":1:8: sample.count must be an integer, got a list");
    bad("count:\n", ":1:7: sample.count must be an integer, got nothing");
    bad("count: 1\nflags: -1\n", ":2:8: sample.flags must be from 0 to 4294967295, got -1");
    bad("count: 1\nbig: 99999999999999999999\n", ":2:6: sample.big must be at least -10000000000, got "
        "99999999999999999999");
    bad("count: 1\nbytes: 3 parsecs\n", ":2:8: sample.bytes: size '3 parsecs' has an unknown unit 'parsecs' (use B, "
        "KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
    bad("count: 1\nbytes: -2GiB\n", ":2:8: sample.bytes: size '-2GiB' is negative");
    bad("count: 1\nbytes: {a: 1}\n", ":2:8: sample.bytes must be a size like 30GiB or 512MiB, got a mapping");
    bad("count: 1\nratio: 1.5\n", ":2:8: sample.ratio must be from 0 to 1, got 1.5");
    bad("count: 1\nratio: nan\n", ":2:8: sample.ratio must be a number, got 'nan'");
    bad("count: 1\non: yes\n", ":2:5: sample.on must be true or false, got 'yes'");
    bad("count: 1\ncolour: bleu\n", ":2:9: sample.colour must be red, green or blue, got 'bleu' (did you mean 'blue'?)");
    bad("count: 1\ncolour: purple\n", ":2:9: sample.colour must be red, green or blue, got 'purple'");
    bad("count: 1\nlabel: abcdefgh\n", ":2:8: sample.label is longer than 7 characters");
    bad("count: 1\nlabel: {x: 1}\n", ":2:8: sample.label must be a string, got a mapping");
    bad("count: 1\nlevels: [1, 2, 3, 4]\n", ":2:19: sample.levels has more than 3 entries");
    bad("count: 1\nlevels: [1, 0]\n", ":2:13: sample.levels[1] must be from 1 to 64, got 0");
    bad("count: 1\nlevels: []\n", ":2:9: sample.levels must not be empty");
    bad("count: 1\nlevels: 4\n", ":2:9: sample.levels must be a list of integers, got '4'");
    bad("count: 1\ninner: 3\n", ":2:8: sample.inner must be a mapping, got '3'");
    bad("count: 1\ninner:\n  depht: 2\n", ":3:3: unknown key 'depht' in sample.inner (did you mean 'depth'?)");
    bad("count: 1\ninner: {depth: 10}\n", ":2:16: sample.inner.depth must be from 0 to 9, got 10");
    bad("count: 1\ncuont: 2\n", ":2:1: unknown key 'cuont' in sample (did you mean 'count'?)");
    bad("count: 1\nzzzzzz: 2\n", ":2:1: unknown key 'zzzzzz' in sample");
    bad("count: 1\ncount: 2\n", ":2:1: duplicate key 'count' in sample (first at line 1)");
    bad("? [a]\n: 1\n", ":1:3: a key must be a name, got a list");
    bad("on: true\n", ":1:1: missing key 'count' in sample");
    bad("- 1\n", ":1:1: sample must be a mapping, got a list");

    /* the document itself */
    bad("count: 1\n  label: x\n", ":2:8: YAML syntax error: mapping values are not allowed in this context");
    bad("count: [1, 2\n", ":2:1: YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence "
        "at line 1)");
    bad("count: 1\n\tlabel: x\n", ":2:1: YAML syntax error: found a tab character that violates indentation (while "
        "scanning a plain scalar at line 1)");
    bad("count: 1\n---\ncount: 2\n", ":2:1: a second YAML document; a scenario file holds exactly one");
    bad("count: 1\nlabel: \xff\n", ":2:8: invalid input: invalid leading UTF-8 octet");
    bad("", ":1:1: empty file: a scenario is a mapping of keys (name, model, job, ...)");
    bad("# only a comment\n", ":1:1: empty file: a scenario is a mapping of keys (name, model, job, ...)");
    bad("count: *nowhere\n", ":1:8: YAML syntax error: found undefined alias");

    struct yaml_doc d;
    memset(&e, 0, sizeof e);
    is_int(yaml_doc_load(&d, "/nonexistent/x.yaml", &e), -1, "a missing file is rejected");
    is_str(e.msg, "/nonexistent/x.yaml: cannot open: No such file or directory", "  message");
    memset(&e, 0, sizeof e);
    is_int(yaml_doc_load(&d, "/tmp", &e), -1, "a directory is not a scenario file");
    is_str(e.msg, "/tmp: not a regular file", "  message");
    return done_testing();
}
