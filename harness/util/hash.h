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

/* The last len (< 8) of n bytes ending at end, zero-padded as memcpy into a zeroed word would give them: with
 * loads that overlap instead of a byte loop (whose byte stores the word's load then waits for). */
static inline uint64_t hash_tail(const unsigned char *end, size_t len, size_t n)
{
    uint64_t w = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (len && n >= 8) { /* the word ending at end, its first 8 - len bytes shifted out */
        memcpy(&w, end - 8, 8);
        return w >> (8 * (8 - len));
    }
    const unsigned char *s = end - len;
    if (len >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, s, 4);
        memcpy(&hi, end - 4, 4);
        return lo | (uint64_t)hi << (8 * (len - 4));
    }
    if (len)
        w = s[0] | (uint64_t)s[len / 2] << (8 * (len / 2)) | (uint64_t)s[len - 1] << (8 * (len - 1));
#else
    memcpy(&w, end - len, len);
#endif
    return w;
}

/* A hash of len bytes, eight a step (multiply-xorshift, the tail zero-padded, the length mixed in): for
 * string keys looked up once per op, with HASH_FIND_BYHASHVALUE, where the Jenkins hash costs most. */
static inline uint64_t hash_bytes(const void *p, size_t len)
{
    const unsigned char *s = (const unsigned char *)p;
    const size_t n = len;
    uint64_t h = len * UINT64_C(0x9E3779B97F4A7C15), w;
    for (; len >= 8; len -= 8, s += 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * UINT64_C(0xBF58476D1CE4E5B9);
        h ^= h >> 31;
    }
    h = (h ^ hash_tail(s + len, len, n)) * UINT64_C(0x94D049BB133111EB);
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
