/* duration.c: see duration.h. */
#include "util/duration.h"

#include <string.h>

#define WEEK_SECONDS (7.0 * 24 * 3600)

int duration_parse(const char *s, double *seconds, struct err *e)
{
    static const struct {
        const char *unit;
        double seconds;
    } units[] = {{"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}};
    const char *p = s;
    double v = 0, scale = 1;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        v = v * 10 + (*p - '0');
    if (digits && *p == '.' && p[1] >= '0' && p[1] <= '9')
        for (p++; *p >= '0' && *p <= '9'; p++)
            v += (*p - '0') * (scale /= 10);
    if (!digits)
        return err_set(e, ERR_INPUT, "'%s' is not a duration (a number and a unit: 500ms, 30s, 10m, 2h)", s);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].unit))
            continue;
        if (v * units[i].seconds > WEEK_SECONDS)
            return err_set(e, ERR_INPUT, "'%s' is longer than a week", s);
        *seconds = v * units[i].seconds;
        return 0;
    }
    return err_set(e, ERR_INPUT, "'%s' needs a unit: ms, s, m or h (500ms, 30s, 10m, 2h)", s);
}
