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

/* A hash of len bytes, eight a step (multiply-xorshift, the tail zero-padded, the length mixed in): for
 * string keys looked up once per op, with HASH_FIND_BYHASHVALUE, where the Jenkins hash costs most. */
static inline uint64_t hash_bytes(const void *p, size_t len)
{
    const unsigned char *s = (const unsigned char *)p;
    uint64_t h = len * UINT64_C(0x9E3779B97F4A7C15), w;
    for (; len >= 8; len -= 8, s += 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * UINT64_C(0xBF58476D1CE4E5B9);
        h ^= h >> 31;
    }
    w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * UINT64_C(0x94D049BB133111EB);
    return h ^ (h >> 29);
}

/* Frees every element of the table at head (allocated with malloc) and the table: a teardown without a
 * HASH_DEL per element. */
#define HASH_FREE_ALL(hh, head)                                                                              \
    do {                                                                                                     \
        __typeof__(head) elt_ = (head), next_;                                                               \
        HASH_CLEAR(hh, head);                                                                                \
        for (; elt_; elt_ = next_) {                                                                         \
            next_ = elt_->hh.next;                                                                           \
            free(elt_);                                                                                      \
        }                                                                                                    \
    } while (0)

/* Whether the last HASH_ADD of elt went in (uthash clears elt->hh.tbl when it could not). */
#define HASH_ADDED(elt) ((elt)->hh.tbl != NULL)

#endif
