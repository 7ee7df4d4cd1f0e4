/* pickle_fuzz.c: the pickle reader on arbitrary bytes, then a walk of what it built through the
 * public accessors (bounded by a step budget, since memo sharing makes the value graph a DAG or even
 * a cycle): every error is an ERR_INPUT/ERR_INTERNAL message, never a crash. */
#include <string.h>

#include "fuzz.h"
#include "replay/pickle.h"

/* Visits v and its items depth-first while *budget lasts. */
static void walk(const struct pickle_value *v, int depth, size_t *budget)
{
    if (!v || depth > 32 || *budget == 0)
        return;
    --*budget;
    bool b;
    int64_t i;
    uint64_t u;
    double f;
    size_t len;
    (void)pickle_get_bool(v, &b), (void)pickle_get_i64(v, &i), (void)pickle_get_u64(v, &u);
    (void)pickle_get_float(v, &f);
    const char *s = pickle_str(v, &len);
    fuzz_require(!s || s[len] == '\0', "a str is NUL-terminated");
    fuzz_require(pickle_type_name(pickle_type(v)) != NULL, "every value has a type name");
    size_t n = pickle_len(v);
    for (size_t k = 0; k < n && *budget; k++) {
        if (pickle_type(v) == PICKLE_DICT) {
            const struct pickle_value *key = pickle_dict_key(v, k);
            const char *ks = pickle_str(key, &len);
            if (ks && strlen(ks) == len)
                fuzz_require(pickle_dict_get(v, ks) != NULL, "a str key of a dict is found by lookup");
            walk(pickle_dict_value(v, k), depth + 1, budget);
        } else {
            walk(pickle_item(v, k), depth + 1, budget);
        }
    }
    fuzz_require(!pickle_item(v, n) && !pickle_dict_key(v, n), "items past the end are NULL");
}

FUZZ_TARGET(pickle)
{
    struct pickle_doc *doc;
    struct err e = {0};
    if (pickle_parse("fuzz.pickle", data, size, &doc, &e)) {
        fuzz_require(doc == NULL && e.code != ERR_NONE && e.msg[0], "a failed parse sets a message and no doc");
        return 0;
    }
    size_t budget = 4096;
    walk(pickle_root(doc), 0, &budget);
    pickle_dict_get(pickle_root(doc), "segments");
    pickle_free(doc);
    return 0;
}
