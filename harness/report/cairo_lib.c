/* cairo_lib.c: cairo opened on the first picture (cairo_lib.h). */
#define CAIRO_LIB_FILL
#include "report/cairo_lib.h"

#include <pthread.h>

#include "util/lazy_lib.h"

struct cairo_lib cairo_lib;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512]; /* why the load failed; empty when it worked */

static void load(void)
{
#define CAIRO_LIB_SYMBOL(f) {#f, (void **)&cairo_lib.f},
    static const struct lazy_symbol syms[] = {CAIRO_LIB_FUNCTIONS(CAIRO_LIB_SYMBOL)};
#undef CAIRO_LIB_SYMBOL
    lazy_lib_open("libcairo.so.2", "cairo for pictures", syms, sizeof syms / sizeof syms[0], load_error,
                  sizeof load_error);
}

int cairo_lib_load(struct err *e)
{
    pthread_once(&load_once, load);
    if (load_error[0])
        return err_set(e, ERR_INTERNAL, "%s", load_error);
    return 0;
}
