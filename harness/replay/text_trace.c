/* text_trace.c: the text trace format: one event per line,
 *     alloc ID BYTES [STREAM]     BYTES is an integer or a size with a unit (4096, 10MiB); STREAM defaults to 0
 *     free ID
 *     empty_cache
 *     reset_peak_memory_stats
 *     reset_accumulated_memory_stats
 *     # a comment (also after an event)
 * IDs are any non-blank words. Errors name file:line:column. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/replay.h"
#include "util/hash.h"
#include "util/size.h"
#include "util/vec.h"

struct id_entry {
    char *name;
    uint64_t key;
    UT_hash_handle hh;
};

struct parse {
    const char *path;
    struct replay_input *in;
    struct id_entry *ids;
    size_t cap_events, cap_ids;
};

static int intern(struct parse *ps, const char *word, bool create, uint64_t *key, struct err *e)
{
    struct id_entry *it;
    HASH_FIND_STR(ps->ids, word, it);
    if (it) {
        *key = it->key;
        return 1;
    }
    if (!create)
        return 0;
    struct replay_input *in = ps->in;
    if (vec_grow((void **)&in->id_names, &ps->cap_ids, in->nids + 1, sizeof *in->id_names) ||
        !(it = calloc(1, sizeof *it)) || !(it->name = strdup(word))) {
        free(it);
        return err_set(e, ERR_INTERNAL, "out of host memory reading %s", ps->path);
    }
    it->key = in->nids;
    in->id_names[in->nids++] = it->name;
    HASH_ADD_KEYPTR(hh, ps->ids, it->name, strlen(it->name), it);
    if (!HASH_ADDED(it)) {
        free(it); /* its name stays in id_names, which owns it */
        return err_set(e, ERR_INTERNAL, "out of host memory reading %s", ps->path);
    }
    *key = it->key;
    return 1;
}

/* Splits a line into at most 8 words, remembering their columns; '#' starts a comment. */
static int split_words(char *line, char **words, int *cols, int max)
{
    int n = 0;
    char *p = line;
    while (*p) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p || *p == '#')
            break;
        if (n == max)
            return max + 1;
        words[n] = p;
        cols[n++] = (int)(p - line) + 1;
        while (*p && !isspace((unsigned char)*p) && *p != '#')
            p++;
        if (*p == '#') {
            *p = '\0';
            break;
        }
        if (*p)
            *p++ = '\0';
    }
    return n;
}

static int parse_line(struct parse *ps, char *line, size_t lineno, struct err *e)
{
    char *w[8];
    int col[8];
    int n = split_words(line, w, col, 6);
    if (n == 0)
        return 0;
    const char *path = ps->path;
    if (n > 6)
        return err_set(e, ERR_INPUT, "%s:%zu:1: too many words", path, lineno);
    struct replay_event ev = {.index = lineno};
    int want_min, want_max;
    if (!strcmp(w[0], "alloc")) {
        ev.op = RP_ALLOC;
        want_min = 3, want_max = 4;
    } else if (!strcmp(w[0], "free")) {
        ev.op = RP_FREE;
        want_min = want_max = 2;
    } else if (!strcmp(w[0], "empty_cache")) {
        ev.op = RP_EMPTY_CACHE;
        want_min = want_max = 1;
    } else if (!strcmp(w[0], "reset_peak_memory_stats")) {
        ev.op = RP_RESET_PEAK;
        want_min = want_max = 1;
    } else if (!strcmp(w[0], "reset_accumulated_memory_stats")) {
        ev.op = RP_RESET_ACCUMULATED;
        want_min = want_max = 1;
    } else {
        return err_set(e, ERR_INPUT,
                       "%s:%zu:%d: unknown trace verb '%s' (expected alloc, free, empty_cache, "
                       "reset_peak_memory_stats or reset_accumulated_memory_stats)",
                       path, lineno, col[0], w[0]);
    }
    if (n < want_min || n > want_max) {
        static const char *const usage[] = {[RP_ALLOC] = "alloc ID BYTES [STREAM]", [RP_FREE] = "free ID",
                                            [RP_EMPTY_CACHE] = "empty_cache",
                                            [RP_RESET_PEAK] = "reset_peak_memory_stats",
                                            [RP_RESET_ACCUMULATED] = "reset_accumulated_memory_stats"};
        return err_set(e, ERR_INPUT, "%s:%zu:%d: expected '%s'", path, lineno, col[n < want_min ? 0 : want_max],
                       usage[ev.op]);
    }
    if (ev.op == RP_ALLOC) {
        if (size_parse(w[2], &ev.bytes, e))
            return err_prefix(e, "%s:%zu:%d: ", path, lineno, col[2]);
        if (n == 4) {
            char *end;
            errno = 0;
            if (w[3][0] == '-' || (ev.stream = strtoull(w[3], &end, 0), *end || errno))
                return err_set(e, ERR_INPUT, "%s:%zu:%d: stream '%s' is not a non-negative integer", path, lineno,
                               col[3], w[3]);
        }
        if (intern(ps, w[1], true, &ev.key, e) < 0)
            return -1;
    } else if (ev.op == RP_FREE) {
        int found = intern(ps, w[1], false, &ev.key, e);
        if (found == 0)
            return err_set(e, ERR_INPUT, "%s:%zu:%d: free of '%s', which no earlier line allocates", path, lineno,
                           col[1], w[1]);
    }
    struct replay_input *in = ps->in;
    if (vec_grow((void **)&in->events, &ps->cap_events, in->nevents + 1, sizeof *in->events))
        return err_set(e, ERR_INTERNAL, "out of host memory reading %s", path);
    in->events[in->nevents++] = ev;
    return 0;
}

int text_trace_load(const char *path, struct replay_input *in, struct err *e)
{
    *in = (struct replay_input){.name = path};
    FILE *f = fopen(path, "r");
    if (!f)
        return err_set(e, ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct parse ps = {.path = path, .in = in};
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    int rc = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        if ((rc = parse_line(&ps, line, lineno, e)))
            break;
    }
    free(line);
    fclose(f);
    struct id_entry *it, *tmp;
    HASH_ITER(hh, ps.ids, it, tmp) {
        HASH_DEL(ps.ids, it);
        free(it); /* the name itself is owned by in->id_names */
    }
    if (rc)
        replay_input_free(in);
    return rc;
}
