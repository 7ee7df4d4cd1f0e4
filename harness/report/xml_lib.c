/* xml_lib.c: libxml2 opened on first use (xml_lib.h). */
#define XML_LIB_FILL
#include "report/xml_lib.h"

#include <pthread.h>

#include "util/lazy_lib.h"

struct xml_lib xml_lib;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512]; /* why the load failed; empty when it worked */

static void load(void)
{
#define XML_LIB_SYMBOL(f) {#f, (void **)&xml_lib.f},
    static const struct lazy_symbol syms[] = {XML_LIB_FUNCTIONS(XML_LIB_SYMBOL)};
#undef XML_LIB_SYMBOL
    lazy_lib_open("libxml2.so.2", "libxml2 for JUnit XML", syms, sizeof syms / sizeof syms[0], load_error,
                  sizeof load_error);
}

int xml_lib_load(struct err *e)
{
    pthread_once(&load_once, load);
    if (load_error[0])
        return err_set(e, ERR_INTERNAL, "%s", load_error);
    return 0;
}
