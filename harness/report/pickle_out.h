/* pickle_out.h: writing Python pickles (protocol 2) of dicts, lists, tuples, strings, ints, floats, bools
 * and None, as a stream of calls, for snapshots in PyTorch's own format. Strings are memoized, so a key
 * or a module name written a thousand times is stored once. No C library writes pickles; the reader in
 * replay/pickle.c reads these back, and Python's pickle.load does too. */
#ifndef OOMLAB_PICKLE_OUT_H
#define OOMLAB_PICKLE_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct pickle_out;

struct pickle_out *pickle_out_create(FILE *f); /* NULL without host memory */
/* Ends the pickle (STOP); 0, or -1 if any write failed or memory ran out on the way. */
int pickle_out_finish(struct pickle_out *p);
void pickle_out_destroy(struct pickle_out *p);

/* Containers: begin, then the items (for a dict: key, value, key, value, ...), then end. */
void po_dict_begin(struct pickle_out *p);
void po_dict_end(struct pickle_out *p);
void po_list_begin(struct pickle_out *p);
void po_list_end(struct pickle_out *p);
void po_tuple_begin(struct pickle_out *p);
void po_tuple_end(struct pickle_out *p);

void po_str(struct pickle_out *p, const char *s);
void po_int(struct pickle_out *p, int64_t v);
void po_uint(struct pickle_out *p, uint64_t v);
void po_float(struct pickle_out *p, double v);
void po_bool(struct pickle_out *p, bool v);
void po_none(struct pickle_out *p);

/* A dict entry whose key is a string: po_key(p, "size"); po_uint(p, 512); */
static inline void po_key(struct pickle_out *p, const char *key)
{
    po_str(p, key);
}

#endif
