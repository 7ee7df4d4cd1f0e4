/* size.c: the number syntax of size.h (decimal integers and sizes, read exactly with integer
 * arithmetic), capacities, and formatting sizes exactly as c10::format_size does. */
#include "util/size.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int uint_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out, struct err *e)
{
    if (!s || !*s)
        return err_set(e, ERR_INPUT, "empty number (expected a decimal integer)");
    uint64_t v = 0;
    bool too_big = false;
    for (const char *p = s; *p; p++) {
        if (!is_digit(*p))
            return err_set(e, ERR_INPUT, "'%s' is not a decimal integer (digits 0-9 only)", s);
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            too_big = true;
        else
            v = v * 10 + d;
    }
    if (too_big || v < min || v > max)
        return err_set(e, ERR_INPUT, "'%s' is out of range %llu..%llu", s, (unsigned long long)min,
                       (unsigned long long)max);
    *out = v;
    return 0;
}

static const struct {
    const char *suffix;
    uint64_t mult;
} units[] = {
    {"", 1},
    {"B", 1},
    {"KiB", KiB},
    {"MiB", MiB},
    {"GiB", GiB},
    {"TiB", 1024 * GiB},
    {"KB", 1000ULL},
    {"MB", 1000000ULL},
    {"GB", 1000000000ULL},
    {"TB", 1000000000000ULL},
};

/* floor(0.DIGITS x mult), exactly: long multiplication from the last digit, whose carry out of the
 * units place is the result (each carry stays below mult, so nothing overflows). */
static uint64_t fraction_times(const char *digits, size_t n, uint64_t mult)
{
    uint64_t carry = 0;
    for (size_t i = n; i-- > 0;)
        carry = ((uint64_t)(digits[i] - '0') * mult + carry) / 10;
    return carry;
}

/* Parses a size into *out and the index of its unit into *unit (0: none). */
static int parse_size(const char *s, uint64_t *out, size_t *unit, struct err *e)
{
    if (!s || !*s)
        return err_set(e, ERR_INPUT, "empty size");
    if (*s == '-')
        return err_set(e, ERR_INPUT, "size '%s' is negative", s);
    if (!is_digit(*s))
        return err_set(e, ERR_INPUT, "size '%s' does not start with a number", s);
    const char *p = s;
    uint64_t whole = 0;
    bool too_big = false;
    for (; is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        too_big |= whole > (SIZE_LIMIT - d) / 10;
        if (!too_big)
            whole = whole * 10 + d;
    }
    const char *frac = p;
    size_t nfrac = 0;
    if (*p == '.') {
        frac = ++p;
        while (is_digit(*p))
            p++;
        nfrac = (size_t)(p - frac);
        if (!nfrac)
            return err_set(e, ERR_INPUT, "size '%s' is not a decimal number (a point needs digits after it)", s);
    }
    if ((*p == 'x' || *p == 'X' || *p == 'e' || *p == 'E') && (is_digit(p[1]) || p[1] == '-' || p[1] == '+'))
        return err_set(e, ERR_INPUT,
                       "size '%s' is not a decimal number (oomlab reads digits with an optional point, then a unit)",
                       s);
    while (*p == ' ' || *p == '\t')
        p++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].suffix) != 0)
            continue;
        uint64_t m = units[i].mult;
        if (too_big || whole > SIZE_LIMIT / m || whole * m > SIZE_LIMIT - fraction_times(frac, nfrac, m))
            return err_set(e, ERR_INPUT, "size '%s' is above the largest size oomlab accepts, 4 EiB (2^62 bytes)", s);
        *out = whole * m + fraction_times(frac, nfrac, m);
        *unit = i;
        return 0;
    }
    return err_set(e, ERR_INPUT, "size '%s' has an unknown unit '%s' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s,
                   p);
}

int size_parse(const char *s, uint64_t *out, struct err *e)
{
    size_t unit;
    return parse_size(s, out, &unit, e);
}

int capacity_parse(const char *s, struct capacity *out, struct err *e)
{
    *out = (struct capacity){0, 0.0};
    size_t len = s ? strlen(s) : 0;
    if (len > 1 && s[len - 1] == '%') {
        char number[64];
        uint64_t whole;
        size_t unit;
        struct err why = {0};
        snprintf(number, sizeof number, "%.*s", (int)(len - 1), s);
        double pct = len - 1 < sizeof number && parse_size(number, &whole, &unit, &why) == 0 && unit == 0
                         ? strtod(number, NULL)
                         : -1.0;
        if (!(pct > 0.0 && pct <= 100.0))
            return err_set(e, ERR_INPUT, "capacity '%s' is not a percentage in (0, 100]", s);
        out->fraction = pct / 100.0;
        return 0;
    }
    uint64_t bytes;
    size_t unit;
    if (parse_size(s, &bytes, &unit, e))
        return -1;
    if (unit == 0) { /* a bare number is a share: a size needs its unit ("24" is not 24 bytes) */
        double bare = strtod(s, NULL);
        if (bare > 0.0 && bare <= 1.0) {
            out->fraction = bare;
            return 0;
        }
        if (bare > 1.0)
            return err_set(e, ERR_INPUT,
                           "capacity '%s': a bare number is a share in (0, 1]; give a size with its unit (%sGiB, "
                           "%sMiB) or a percentage (%s%%)", s, s, s, s);
    }
    if (!bytes)
        return err_set(e, ERR_INPUT, "capacity '%s' is zero", s);
    out->bytes = bytes;
    return 0;
}

int capacity_resolve(struct capacity c, uint64_t full, uint64_t dflt, uint64_t *out, struct err *e)
{
    if (c.bytes) {
        *out = c.bytes;
        return 0;
    }
    if (c.fraction <= 0.0) {
        *out = dflt;
        return 0;
    }
    *out = (uint64_t)((double)full * c.fraction);
    if (*out == 0) {
        char size[32];
        size_format_pytorch(full, size, sizeof size);
        return err_set(e, ERR_INPUT, "a share of %g of %s is 0 bytes: give a larger share or a size", c.fraction, size);
    }
    return 0;
}

void size_format_pytorch(uint64_t n, char *buf, size_t len)
{
    if (n <= 1024)
        snprintf(buf, len, "%llu bytes", (unsigned long long)n);
    else if (n <= MiB)
        snprintf(buf, len, "%.2f KiB", (double)n / 1024.0);
    else if (n <= GiB)
        snprintf(buf, len, "%.2f MiB", (double)n / 1048576.0);
    else
        snprintf(buf, len, "%.2f GiB", (double)n / 1073741824.0);
}

void size_format_flag(uint64_t n, char *buf, size_t len)
{
    uint64_t hundredths = (n * 100 + GiB - 1) / GiB; /* rounded up: the flag must hold n */
    if (n < GiB)
        snprintf(buf, len, "%lluMiB", (unsigned long long)((n + MiB - 1) / MiB));
    else
        snprintf(buf, len, "%llu.%02lluGiB", (unsigned long long)(hundredths / 100),
                 (unsigned long long)(hundredths % 100));
}
