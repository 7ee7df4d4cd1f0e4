/* size.c: parsing human-written sizes and formatting sizes exactly as c10::format_size does. */
#include "util/size.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *suffix;
    double mult;
} units[] = {
    {"", 1},
    {"B", 1},
    {"KiB", 1024.0},
    {"MiB", 1048576.0},
    {"GiB", 1073741824.0},
    {"TiB", 1099511627776.0},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
};

int size_parse(const char *s, uint64_t *out, struct err *e)
{
    if (!s || !*s)
        return err_set(e, ERR_INPUT, "empty size");
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-')
        return err_set(e, ERR_INPUT, "size '%s' is negative", s);
    if (!isdigit((unsigned char)*p) && *p != '.')
        return err_set(e, ERR_INPUT, "size '%s' does not start with a number", s);
    errno = 0;
    char *end;
    double v = strtod(p, &end);
    if (errno || end == p || !isfinite(v) || v < 0)
        return err_set(e, ERR_INPUT, "size '%s' is not a number", s);
    while (isspace((unsigned char)*end))
        end++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            double bytes = v * units[i].mult;
            if (bytes >= 18446744073709551615.0)
                return err_set(e, ERR_INPUT, "size '%s' is too large", s);
            *out = (uint64_t)bytes;
            return 0;
        }
    }
    return err_set(e, ERR_INPUT, "size '%s' has an unknown unit '%s' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s,
                   end);
}

int capacity_parse(const char *s, struct capacity *out, struct err *e)
{
    *out = (struct capacity){0, 0.0};
    size_t len = s ? strlen(s) : 0;
    char *end;
    if (len > 1 && s[len - 1] == '%') {
        errno = 0;
        double pct = strtod(s, &end);
        if (errno || end != s + len - 1 || !(pct > 0.0 && pct <= 100.0))
            return err_set(e, ERR_INPUT, "capacity '%s' is not a percentage in (0, 100]", s);
        out->fraction = pct / 100.0;
        return 0;
    }
    uint64_t bytes;
    if (size_parse(s, &bytes, e))
        return -1;
    errno = 0;
    double bare = strtod(s, &end);
    while (isspace((unsigned char)*end))
        end++;
    if (!*end && !errno && bare > 0.0 && bare <= 1.0) {
        out->fraction = bare;
        return 0;
    }
    if (!*end && bare != (double)bytes)
        return err_set(e, ERR_INPUT, "capacity '%s': a bare number is a fraction in (0, 1] or a whole count of bytes", s);
    if (!bytes)
        return err_set(e, ERR_INPUT, "capacity '%s' is zero", s);
    out->bytes = bytes;
    return 0;
}

uint64_t capacity_resolve(struct capacity c, uint64_t full, uint64_t dflt)
{
    if (c.bytes)
        return c.bytes;
    if (c.fraction > 0.0)
        return (uint64_t)((double)full * c.fraction);
    return dflt;
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
