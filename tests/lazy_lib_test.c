/* lazy_lib_test.c: a library opened on first use fills every slot, or none: libm's cos and sqrt work once
 * loaded; a missing symbol or library leaves the slots as they were and the error names it (the soname or
 * the symbol), as cairo_lib and xml_lib report it; a second load gives the first one's answer. Also: the
 * binary links neither cairo nor libxml2, which those two open. */
#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "util/lazy_lib.h"

static double (*my_cos)(double), (*my_sqrt)(double);
static void *slot_a = &slot_a, *slot_b = &slot_a; /* "untouched": pointing at slot_a */

static const struct lazy_symbol good_syms[] = {{"cos", (void **)&my_cos}, {"sqrt", (void **)&my_sqrt}};
static const struct lazy_symbol partial_syms[] = {{"cos", &slot_a}, {"no_such_symbol_oomlab", &slot_b}};
static struct lazy_lib good = LAZY_LIB_INIT("libm.so.6", "libm", good_syms);
static struct lazy_lib partial = LAZY_LIB_INIT("libm.so.6", "libm", partial_syms);
static struct lazy_lib missing = LAZY_LIB_INIT("libno-such-oomlab.so.9", "pictures", partial_syms);

int main(void)
{
    struct err e = {0};
    is_int(lazy_lib_load(&good, &e), 0, "libm opens");
    ok(my_cos && my_cos(0.0) == 1.0, "cos through its slot");
    ok(my_sqrt && my_sqrt(16.0) == 4.0, "sqrt through its slot");
    is_int(lazy_lib_load(&good, &e), 0, "and a second load is the first one's answer");

    is_int(lazy_lib_load(&partial, &e), -1, "a missing symbol fails");
    is_str(e.msg, "cannot load libm: libm.so.6 has no no_such_symbol_oomlab", "and names it");
    is_int(e.code, ERR_INTERNAL, "an internal error (exit 3)");
    ok(slot_a == &slot_a && slot_b == &slot_a, "no slot is filled when one symbol is missing");
    e = (struct err){0};
    is_int(lazy_lib_load(&partial, &e), -1, "a second load fails again");
    is_str(e.msg, "cannot load libm: libm.so.6 has no no_such_symbol_oomlab", "with the same message");

    e = (struct err){0};
    is_int(lazy_lib_load(&missing, &e), -1, "a missing library fails");
    ok(!strncmp(e.msg, "cannot load pictures: libno-such-oomlab.so.9", 44), "and names it: %s", e.msg);
    ok(slot_a == &slot_a, "its slots stay as they were");

    /* what a sim run's process maps at start: not cairo (pictures), not libxml2 (JUnit) */
    const char *bin = getenv("OOMLAB_BIN");
    if (bin) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "ldd '%s' | grep -c -E 'libcairo|libxml2'", bin);
        FILE *p = popen(cmd, "r");
        char line[32] = "";
        ok(p && fgets(line, sizeof line, p) && atoi(line) == 0, "%s links neither cairo nor libxml2", bin);
        if (p)
            pclose(p);
    } else {
        ok(1, "# SKIP OOMLAB_BIN is not set");
    }
    return done_testing();
}
