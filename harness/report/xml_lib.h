/* xml_lib.h: libxml2 opened on first use (util/lazy_lib.h), for `oomlab check --junit` alone: linked, it and
 * the ICU it brings cost about 0.7 ms of every process's start. Include this instead of <libxml/xmlwriter.h>:
 * each libxml2 function oomlab calls is a pointer in xml_lib that the function's name stands for, so calls
 * read as plain libxml2. Call xml_lib_load (cheap once loaded) before the first call. */
#ifndef OOMLAB_XML_LIB_H
#define OOMLAB_XML_LIB_H

#include <libxml/xmlwriter.h>

#include "util/err.h"

#define XML_LIB_FUNCTIONS(X)                                                                                 \
    X(xmlBufferContent) X(xmlBufferCreate) X(xmlBufferFree) X(xmlBufferLength) X(xmlFreeTextWriter)          \
    X(xmlNewTextWriterMemory) X(xmlTextWriterEndDocument) X(xmlTextWriterEndElement)                         \
    X(xmlTextWriterSetIndent) X(xmlTextWriterStartDocument) X(xmlTextWriterStartElement)                     \
    X(xmlTextWriterWriteAttribute)

#define XML_LIB_MEMBER(f) __typeof__(f) *f;
struct xml_lib {
    XML_LIB_FUNCTIONS(XML_LIB_MEMBER)
};
#undef XML_LIB_MEMBER
extern struct xml_lib xml_lib;

/* 0, or -1 with e set when libxml2 (libxml2.so.2) cannot be loaded. */
int xml_lib_load(struct err *e);

/* From here on xmlBufferCreate(...) is xml_lib.xmlBufferCreate(...); xml_lib.c, which fills the table, goes
 * without. */
#ifndef XML_LIB_FILL
#define xmlBufferContent xml_lib.xmlBufferContent
#define xmlBufferCreate xml_lib.xmlBufferCreate
#define xmlBufferFree xml_lib.xmlBufferFree
#define xmlBufferLength xml_lib.xmlBufferLength
#define xmlFreeTextWriter xml_lib.xmlFreeTextWriter
#define xmlNewTextWriterMemory xml_lib.xmlNewTextWriterMemory
#define xmlTextWriterEndDocument xml_lib.xmlTextWriterEndDocument
#define xmlTextWriterEndElement xml_lib.xmlTextWriterEndElement
#define xmlTextWriterSetIndent xml_lib.xmlTextWriterSetIndent
#define xmlTextWriterStartDocument xml_lib.xmlTextWriterStartDocument
#define xmlTextWriterStartElement xml_lib.xmlTextWriterStartElement
#define xmlTextWriterWriteAttribute xml_lib.xmlTextWriterWriteAttribute
#endif

#endif
