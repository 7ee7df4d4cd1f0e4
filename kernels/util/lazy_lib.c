/* lazy_lib.c: see lazy_lib.h. */
#include "util/lazy_lib.h"

#include <dlfcn.h>
#include <stdio.h>

static void open_lib(struct lazy_lib *l)
{
    void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *msg = dlerror();
        snprintf(l->why, sizeof l->why, "cannot load %s: %s", l->what, msg ? msg : l->soname);
        return;
    }
    for (size_t i = 0; i < l->nsyms; i++) {
        if (!dlsym(h, l->syms[i].name)) {
            snprintf(l->why, sizeof l->why, "cannot load %s: %s has no %s", l->what, l->soname, l->syms[i].name);
            dlclose(h);
            return;
        }
    }
    for (size_t i = 0; i < l->nsyms; i++)
        *l->syms[i].slot = dlsym(h, l->syms[i].name);
}

int lazy_lib_load(struct lazy_lib *l, struct err *e)
{
    pthread_mutex_lock(&l->lock);
    if (!l->tried)
        open_lib(l);
    l->tried = true;
    pthread_mutex_unlock(&l->lock);
    return l->why[0] ? err_set(e, ERR_INTERNAL, "%s", l->why) : 0;
}
