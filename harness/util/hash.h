/* hash.h: uthash as oomlab uses it: a failed allocation while adding an element leaves the element
 * out (HASH_ADDED says so) instead of exiting the process, so callers report it as an error.
 * Include this, not <uthash.h>. */
#ifndef OOMLAB_HASH_H
#define OOMLAB_HASH_H

#include <stdint.h>
#include <string.h>

/* Word-sized keys (ids, pointers: most of oomlab's tables) are hashed by one multiplication, Fibonacci
 * hashing's high half; other keys by uthash's Jenkins hash. Tables iterate in insertion order whatever
 * the hash, so output does not depend on it. */
#define HASH_FUNCTION(keyptr, keylen, hashv)                                                             \
    do {                                                                                                 \
        if ((keylen) == sizeof(uint64_t)) {                                                              \
            uint64_t word_;                                                                              \
            memcpy(&word_, (keyptr), sizeof word_);                                                      \
            (hashv) = (unsigned)((word_ * UINT64_C(0x9E3779B97F4A7C15)) >> 32);                          \
        } else {                                                                                         \
            HASH_JEN(keyptr, keylen, hashv);                                                             \
        }                                                                                                \
    } while (0)
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

/* Whether the last HASH_ADD of elt went in (uthash clears elt->hh.tbl when it could not). */
#define HASH_ADDED(elt) ((elt)->hh.tbl != NULL)

#endif
