/* lazy_lib_test.c: a library opened on first use fills every slot, or none: libm's cos and sqrt work once
 * loaded; a missing symbol or library leaves the slots as they were and says which one (the soname or
 * the symbol), as cairo_lib and xml_lib report it. Also: the binary links neither cairo nor libxml2. */
#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "util/lazy_lib.h"

int main(void)
{
    double (*my_cos)(double) = NULL, (*my_sqrt)(double) = NULL;
    char why[256] = "";
    const struct lazy_symbol good[] = {{"cos", (void **)&my_cos}, {"sqrt", (void **)&my_sqrt}};
    is_int(lazy_lib_open("libm.so.6", "libm", good, 2, why, sizeof why), 0, "libm opens");
    ok(my_cos && my_cos(0.0) == 1.0, "cos through its slot");
    ok(my_sqrt && my_sqrt(16.0) == 4.0, "sqrt through its slot");

    void *untouched = (void *)&why, *slot = untouched, *slot2 = untouched;
    const struct lazy_symbol partial[] = {{"cos", &slot}, {"no_such_symbol_oomlab", &slot2}};
    is_int(lazy_lib_open("libm.so.6", "libm", partial, 2, why, sizeof why), -1, "a missing symbol fails");
    is_str(why, "cannot load libm: libm.so.6 has no no_such_symbol_oomlab", "and names it");
    ok(slot == untouched && slot2 == untouched, "no slot is filled when one symbol is missing");

    is_int(lazy_lib_open("libno-such-oomlab.so.9", "pictures", partial, 1, why, sizeof why), -1,
           "a missing library fails");
    ok(!strncmp(why, "cannot load pictures: libno-such-oomlab.so.9", 44), "and names it: %s", why);
    ok(slot == untouched, "its slots stay as they were");

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
