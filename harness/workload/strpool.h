/* strpool.h: an interning string pool; interned strings stay valid until the pool is destroyed. */
#ifndef OOMLAB_WORKLOAD_STRPOOL_H
#define OOMLAB_WORKLOAD_STRPOOL_H

#include <stddef.h>

struct strpool;

struct strpool *strpool_create(void);
void strpool_destroy(struct strpool *p);
/* The pool's copy of s (the same pointer for equal strings); NULL when out of memory. */
const char *strpool_intern(struct strpool *p, const char *s);
/* The same, for s of len characters (s[len] is its terminating NUL). */
const char *strpool_intern_len(struct strpool *p, const char *s, size_t len);
size_t strpool_bytes(const struct strpool *p); /* host bytes held */

#endif
