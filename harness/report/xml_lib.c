/* xml_lib.c: libxml2 opened on first use (xml_lib.h). */
#define XML_LIB_FILL
#include "report/xml_lib.h"

#include "util/lazy_lib.h"

struct xml_lib xml_lib;

#define XML_LIB_SYMBOL(f) {#f, (void **)&xml_lib.f},
static const struct lazy_symbol syms[] = {XML_LIB_FUNCTIONS(XML_LIB_SYMBOL)};
static struct lazy_lib lib = LAZY_LIB_INIT("libxml2.so.2", "libxml2 for JUnit XML", syms);

int xml_lib_load(struct err *e)
{
    return lazy_lib_load(&lib, e);
}
