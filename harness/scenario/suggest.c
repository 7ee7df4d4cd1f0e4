/* suggest.c: the nearest candidate by Damerau-Levenshtein distance (adjacent swaps count as one). */
#include "scenario/suggest.h"

#include <ctype.h>
#include <string.h>

#define SUGGEST_MAX_LEN 64

static size_t min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN)
        return (size_t)-1;
    size_t d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < d[i][j])
                d[i][j] = d[i - 2][j - 2] + 1;
        }
    }
    return d[la][lb];
}

const char *suggest_closest(const char *word, size_t ncand, const char *(*name_of)(const void *list, size_t i),
                            const void *list)
{
    size_t len = strlen(word);
    size_t limit = len <= 3 ? 1 : len < 6 ? 2 : len / 3;
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < ncand; i++) {
        const char *cand = name_of(list, i);
        if (!cand)
            continue;
        size_t dist = edit_distance(word, cand);
        if (dist < best_d) {
            best_d = dist;
            best = cand;
        }
    }
    return best_d <= limit ? best : NULL;
}

static const char *nth_name(const void *list, size_t i)
{
    return ((const char *const *)list)[i];
}

const char *suggest_from_names(const char *word, const char *const *names, size_t n)
{
    return suggest_closest(word, n, nth_name, names);
}
