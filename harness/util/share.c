/* share.c: fractions and percentages (see share.h). */
#include "util/share.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int share_parse(const char *s, double *out, struct err *e)
{
    size_t len = s ? strlen(s) : 0;
    bool percent = len > 1 && s[len - 1] == '%';
    char *end;
    errno = 0;
    double v = len && (isdigit((unsigned char)s[0]) || s[0] == '.') ? strtod(s, &end) : NAN;
    if (isnan(v) || errno || end != s + len - percent)
        return err_set(e, ERR_INPUT, "'%s' is not a share: a fraction (0.05) or a percentage (5%%)", s ? s : "");
    if (percent)
        v /= 100.0;
    else if (v > 1.0)
        return err_set(e, ERR_INPUT, "'%s' is more than 1: write a percentage with its sign (%s%%) or a fraction (%g)", s,
                       s, v / 100.0);
    if (v < 0.0 || v > 1.0)
        return err_set(e, ERR_INPUT, "'%s' is not a share between 0 and 100%%", s);
    *out = v;
    return 0;
}
