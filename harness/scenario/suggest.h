/* suggest.h: "did you mean ...?" for misspelt keys and names (edit distance, fio's string_distance). */
#ifndef OOMLAB_SUGGEST_H
#define OOMLAB_SUGGEST_H

#include <stddef.h>

/* The candidate closest to `word`, or NULL if none is close enough to be a plausible typo.
 * `name_of(i)` returns the i-th candidate (NULL entries are skipped). */
const char *suggest_closest(const char *word, size_t ncand, const char *(*name_of)(const void *list, size_t i),
                            const void *list);

/* Convenience for a plain array of strings. */
const char *suggest_from_names(const char *word, const char *const *names, size_t n);

#endif
