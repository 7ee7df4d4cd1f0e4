/* lazy_lib.c: see lazy_lib.h. */
#include "util/lazy_lib.h"

#include <dlfcn.h>
#include <stdio.h>

int lazy_lib_open(const char *soname, const char *what, const struct lazy_symbol *syms, size_t n, char *why,
                  size_t why_len)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *msg = dlerror();
        snprintf(why, why_len, "cannot load %s: %s", what, msg ? msg : soname);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!dlsym(h, syms[i].name)) {
            snprintf(why, why_len, "cannot load %s: %s has no %s", what, soname, syms[i].name);
            dlclose(h);
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        *syms[i].slot = dlsym(h, syms[i].name);
    return 0;
}
