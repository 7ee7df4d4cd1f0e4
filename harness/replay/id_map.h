/* id_map.h: a text trace's live IDs (words as written) to the number each alloc gave them, in an
 * open-addressing index (util/open_index.h: deletion by backward shift, so a trace that allocates and
 * frees millions of IDs leaves no tombstones behind). Memory follows the IDs live at once, never
 * the length of the trace. */
#ifndef OOMLAB_ID_MAP_H
#define OOMLAB_ID_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/open_index.h"

struct id_record;

struct id_map {
    struct open_index index; /* of id_records by their words' hashes; index.count: the live IDs */
    struct id_record *spare; /* short records freed, for the next inserts */
};

/* A word's hash, computed once per line and handed to find and insert. */
uint64_t id_map_hash(const char *word, size_t len);
/* The slot of word, or -1 when it is not live. */
ptrdiff_t id_map_find(const struct id_map *m, const char *word, size_t len, uint64_t hash);
/* The key of the live ID in slot i (from id_map_find). */
uint64_t id_map_key(const struct id_map *m, ptrdiff_t i);
/* Adds word (not live) with key; -1 when out of memory. */
int id_map_insert(struct id_map *m, const char *word, size_t len, uint64_t hash, uint64_t key);
/* Removes the ID in slot i (from id_map_find, with no insert or remove since). */
void id_map_remove(struct id_map *m, ptrdiff_t i);
void id_map_free(struct id_map *m);

#endif
