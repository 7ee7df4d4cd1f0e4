/* err.c: setting and prefixing error messages that carry context up to main(). */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(struct err *e, enum err_code code, const char *fmt, ...)
{
    if (!e || e->code != ERR_NONE)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    return -1;
}

int err_prefix(struct err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    char joined[2 * sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(joined, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof e->msg)
        n = sizeof e->msg - 1;
    memcpy(joined + n, e->msg, sizeof e->msg);
    memcpy(e->msg, joined, sizeof e->msg - 1);
    e->msg[sizeof e->msg - 1] = '\0';
    return -1;
}
