/* cairo_lib.c: cairo opened on the first picture (cairo_lib.h). */
#define CAIRO_LIB_FILL
#include "report/cairo_lib.h"

#include "util/lazy_lib.h"

struct cairo_lib cairo_lib;

#define CAIRO_LIB_SYMBOL(f) {#f, (void **)&cairo_lib.f},
static const struct lazy_symbol syms[] = {CAIRO_LIB_FUNCTIONS(CAIRO_LIB_SYMBOL)};
static struct lazy_lib lib = LAZY_LIB_INIT("libcairo.so.2", "cairo for pictures", syms);

int cairo_lib_load(struct err *e)
{
    return lazy_lib_load(&lib, e);
}
