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
    char prefix[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    snprintf(e->msg, sizeof e->msg, "%s%s", prefix, old);
    return -1;
}
