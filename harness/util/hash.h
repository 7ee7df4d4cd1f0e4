/* hash.h: uthash as oomlab uses it: a failed allocation while adding an element leaves the element
 * out (HASH_ADDED says so) instead of exiting the process, so callers report it as an error.
 * Include this, not <uthash.h>. */
#ifndef OOMLAB_HASH_H
#define OOMLAB_HASH_H

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

/* Whether the last HASH_ADD of elt went in (uthash clears elt->hh.tbl when it could not). */
#define HASH_ADDED(elt) ((elt)->hh.tbl != NULL)

#endif
