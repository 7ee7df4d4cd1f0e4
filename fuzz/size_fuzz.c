/* size_fuzz.c: the number syntax (util/size.h) on arbitrary strings: integers, sizes and capacities
 * either parse to values inside their limits that agree with a plain reading of the digits, or fail
 * with a message. */
#include <string.h>

#include "fuzz.h"
#include "util/size.h"

FUZZ_TARGET(size)
{
    char *s = fuzz_string(data, size);
    if (!s)
        return 0;
    struct err e = {0};
    uint64_t v = 0;
    if (uint_parse(s, 0, UINT64_MAX, &v, &e) == 0) {
        fuzz_require(strspn(s, "0123456789") == strlen(s) && *s, "an integer is digits only");
        fuzz_require(strtoull(s, NULL, 10) == v, "an integer is its decimal value");
    }
    e = (struct err){0};
    if (uint_parse(s, 1, 64, &v, &e) == 0)
        fuzz_require(v >= 1 && v <= 64, "bounds hold");
    e = (struct err){0};
    if (size_parse(s, &v, &e) == 0) {
        fuzz_require(v <= SIZE_LIMIT, "a size is at most SIZE_LIMIT");
        if (strspn(s, "0123456789") == strlen(s))
            fuzz_require(strtoull(s, NULL, 10) == v, "a bare whole size is its byte count");
    } else {
        fuzz_require(e.code == ERR_INPUT && e.msg[0], "a bad size says why");
    }
    struct capacity c;
    e = (struct err){0};
    if (capacity_parse(s, &c, &e) == 0) {
        fuzz_require((c.bytes > 0) != (c.fraction > 0.0), "a capacity is a size or a share");
        fuzz_require(c.bytes <= SIZE_LIMIT && c.fraction <= 1.0, "within limits");
        uint64_t bytes = 0;
        e = (struct err){0};
        if (capacity_resolve(c, SIZE_LIMIT, 1, &bytes, &e) == 0)
            fuzz_require(bytes > 0 && bytes <= SIZE_LIMIT, "a resolved capacity is 1..SIZE_LIMIT bytes");
    }
    free(s);
    return 0;
}
