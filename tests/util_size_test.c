/* util_size_test.c: the one number syntax (util/size.h): decimal integers with bounds ("010" is ten,
 * no hex, no sign), sizes read exactly with their units up to SIZE_LIMIT (4 EiB) and no further, no
 * hex or exponent in sizes, capacity shares, and a share that rounds to 0 bytes refused. */
#include "tap.h"

#include "util/size.h"

static void uint_ok(const char *s, uint64_t min, uint64_t max, uint64_t want)
{
    uint64_t v = 12345;
    struct err e = {0};
    ok(uint_parse(s, min, max, &v, &e) == 0 && v == want, "integer '%s' is %llu%s%s", s, (unsigned long long)want,
       e.msg[0] ? ": " : "", e.msg);
}

static void uint_bad(const char *s, uint64_t min, uint64_t max, const char *msg)
{
    uint64_t v = 12345;
    struct err e = {0};
    ok(uint_parse(s, min, max, &v, &e) == -1 && e.code == ERR_INPUT && v == 12345, "integer '%s' is refused", s);
    is_str(e.msg, msg, "and says why");
}

static void integers(void)
{
    uint_ok("0", 0, 10, 0);
    uint_ok("7", 0, 10, 7);
    uint_ok("010", 0, 100, 10);
    uint_ok("08", 0, 100, 8);
    uint_ok("18446744073709551615", 0, UINT64_MAX, UINT64_MAX);
    uint_bad("0x10", 0, 100, "'0x10' is not a decimal integer (digits 0-9 only)");
    uint_bad("-1", 0, 100, "'-1' is not a decimal integer (digits 0-9 only)");
    uint_bad("+1", 0, 100, "'+1' is not a decimal integer (digits 0-9 only)");
    uint_bad("1e3", 0, 10000, "'1e3' is not a decimal integer (digits 0-9 only)");
    uint_bad(" 1", 0, 100, "' 1' is not a decimal integer (digits 0-9 only)");
    uint_bad("1 ", 0, 100, "'1 ' is not a decimal integer (digits 0-9 only)");
    uint_bad("", 0, 100, "empty number (expected a decimal integer)");
    uint_bad("65", 1, 64, "'65' is out of range 1..64");
    uint_bad("0", 1, 64, "'0' is out of range 1..64");
    uint_bad("18446744073709551616", 0, UINT64_MAX, "'18446744073709551616' is out of range 0..18446744073709551615");
    uint_bad("99999999999999999999999", 0, 100, "'99999999999999999999999' is out of range 0..100");
}

static void size_ok(const char *s, uint64_t want)
{
    uint64_t v = 0;
    struct err e = {0};
    ok(size_parse(s, &v, &e) == 0 && v == want, "size '%s' is %llu%s%s", s, (unsigned long long)want,
       e.msg[0] ? ": " : "", e.msg);
    if (v != want)
        diag("got %llu", (unsigned long long)v);
}

static void size_bad(const char *s, const char *msg)
{
    uint64_t v = 0;
    struct err e = {0};
    ok(size_parse(s, &v, &e) == -1 && e.code == ERR_INPUT, "size '%s' is refused", s);
    is_str(e.msg, msg, "and says why");
}

static void sizes(void)
{
    size_ok("512", 512);
    size_ok("010", 10);
    size_ok("1.5KiB", 1536);
    size_ok("0.3KiB", 307); /* 307.2 rounds down */
    size_ok("1.5 GiB", 1610612736);
    size_ok("2 GB", 2000000000);
    size_ok("31.5GiB", 31 * GiB + GiB / 2);
    size_ok("0.000000000000000000000000000001TiB", 0);
    size_ok("0.9999999999999999999999999KiB", 1023); /* exact: a double would make it 1024 */
    size_ok("4194304TiB", SIZE_LIMIT);
    size_ok("4611686018427387904", SIZE_LIMIT);
    size_ok("4611686018427387904.999", SIZE_LIMIT);
    size_bad("4611686018427387905", "size '4611686018427387905' is above the largest size oomlab accepts, 4 EiB (2^62 bytes)");
    size_bad("4194304.000001TiB", "size '4194304.000001TiB' is above the largest size oomlab accepts, 4 EiB (2^62 bytes)");
    size_bad("10000000TiB", "size '10000000TiB' is above the largest size oomlab accepts, 4 EiB (2^62 bytes)");
    size_bad("99999999999999999999999999", "size '99999999999999999999999999' is above the largest size oomlab accepts, 4 EiB (2^62 bytes)");
    size_bad("0x10", "size '0x10' is not a decimal number (oomlab reads digits with an optional point, then a unit)");
    size_bad("1e9", "size '1e9' is not a decimal number (oomlab reads digits with an optional point, then a unit)");
    size_bad("1.5e-3GiB", "size '1.5e-3GiB' is not a decimal number (oomlab reads digits with an optional point, then a unit)");
    size_bad("5.", "size '5.' is not a decimal number (a point needs digits after it)");
    size_bad(".5GiB", "size '.5GiB' does not start with a number");
    size_bad("inf", "size 'inf' does not start with a number");
    size_bad("-1GiB", "size '-1GiB' is negative");
    size_bad("12 parsecs", "size '12 parsecs' has an unknown unit 'parsecs' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
    size_bad("", "empty size");
}

static void capacities(void)
{
    struct capacity c;
    struct err e = {0};
    ok(capacity_parse("0.000000000000000000001", &c, &e) == 0 && c.fraction > 0.0, "a tiny share parses");
    uint64_t bytes = 99;
    e = (struct err){0};
    ok(capacity_resolve(c, 16 * GiB, 1, &bytes, &e) == -1 && e.code == ERR_INPUT,
       "but rounds to 0 bytes of 16 GiB and is refused");
    is_str(e.msg, "a share of 1e-21 of 16.00 GiB is 0 bytes: give a larger share or a size", "with the reason");
    e = (struct err){0};
    ok(capacity_resolve((struct capacity){0, 1e-9}, 16 * GiB, 1, &bytes, &e) == 0 && bytes == 17,
       "1e-9 of 16 GiB is 17 bytes");
    e = (struct err){0};
    ok(capacity_parse("1e-300", &c, &e) == -1, "an exponent is not a share (%s)", e.msg);
    e = (struct err){0};
    ok(capacity_parse("0x10%", &c, &e) == -1, "nor a hex percentage (%s)", e.msg);
    e = (struct err){0};
    ok(capacity_parse("5EiB", &c, &e) == -1, "EiB is not a unit (%s)", e.msg);
    e = (struct err){0};
    ok(capacity_parse("5000000TiB", &c, &e) == -1 && strstr(e.msg, "above the largest size"),
       "a capacity above 4 EiB is refused (%s)", e.msg);
    e = (struct err){0};
    ok(capacity_parse("4194304TiB", &c, &e) == 0 && c.bytes == SIZE_LIMIT, "4 EiB is accepted");
}

int main(void)
{
    integers();
    sizes();
    capacities();
    return done_testing();
}
