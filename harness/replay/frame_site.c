/* frame_site.c: telling the user's stack frames from torch's, and the interned site table (see
 * frame_site.h). */
#define _GNU_SOURCE /* asprintf */
#include "replay/frame_site.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

static bool is_separator(char c)
{
    return c == '/' || c == '\\';
}

static bool equals(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(s, word, n) == 0;
}

static bool starts_with_nocase(const char *s, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    if (n < k)
        return false;
    for (size_t i = 0; i < k; i++)
        if (tolower((unsigned char)s[i]) != prefix[i])
            return false;
    return true;
}

/* "python3.10", "Python310", "cpython-3.10.19-windows-x86_64-none": a Python install's or version's
 * directory (a digit right after the name). */
static bool is_python_dir(const char *s, size_t n)
{
    size_t k = starts_with_nocase(s, n, "python") ? 6 : starts_with_nocase(s, n, "cpython-") ? 8 : 0;
    return k && n > k && isdigit((unsigned char)s[k]);
}

/* Whether a directory of the path (dir, with its parent's name before it) holds library code. */
static bool is_library_dir(const char *parent, size_t plen, const char *dir, size_t n)
{
    if (equals(dir, n, "torch") || equals(dir, n, "site-packages") || equals(dir, n, "dist-packages") ||
        (n > 14 && memcmp(dir, "torchinductor_", 14) == 0))
        return true;
    if ((equals(parent, plen, "lib") || equals(parent, plen, "lib64")) && is_python_dir(dir, n))
        return true; /* lib/python3.10/ */
    return starts_with_nocase(dir, n, "lib") && n == 3 && is_python_dir(parent, plen); /* Python310\Lib\ */
}

enum frame_kind frame_kind(const char *f, size_t len)
{
    bool pseudo = len > 0 && f[0] == '<';
    if (!pseudo && (len < 3 || memcmp(f + len - 3, ".py", 3) != 0))
        return FRAME_NATIVE;
    if (pseudo)
        return strncmp(f, "<frozen ", 8) == 0 || equals(f, len, "<string>") ? FRAME_LIBRARY : FRAME_USER;
    const char *parent = "", *dir = f;
    size_t plen = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_separator(f[i]))
            continue;
        size_t n = (size_t)(f + i - dir);
        if (is_library_dir(parent, plen, dir, n))
            return FRAME_LIBRARY;
        parent = dir;
        plen = n;
        dir = f + i + 1;
    }
    return FRAME_USER;
}

struct site {
    UT_hash_handle hh;
    char text[];
};

struct site_table {
    struct site *sites;
};

bool frame_is_inline(const char *name)
{
    return name[0] == '<' && strcmp(name, "<module>") != 0;
}

struct site_table *site_table_create(void)
{
    return calloc(1, sizeof(struct site_table));
}

void site_table_free(struct site_table *t)
{
    if (!t)
        return;
    struct site *s, *tmp;
    HASH_ITER(hh, t->sites, s, tmp) {
        HASH_DEL(t->sites, s);
        free(s);
    }
    free(t);
}

/* The interned copy of text[0, n). */
static const char *intern(struct site_table *t, const char *text, size_t n)
{
    struct site *have;
    HASH_FIND(hh, t->sites, text, n, have);
    if (have)
        return have->text;
    struct site *s = malloc(sizeof *s + n + 1);
    if (!s)
        return NULL;
    memcpy(s->text, text, n);
    s->text[n] = '\0';
    HASH_ADD_KEYPTR(hh, t->sites, s->text, n, s);
    if (!HASH_ADDED(s)) {
        free(s);
        return NULL;
    }
    return s->text;
}

const char *site_table_text(struct site_table *t, const char *text)
{
    return intern(t, text, strlen(text));
}

static bool ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* The identifier around s[at] (within s[0, end)) into buf: back to its start, on to its end. */
static void identifier_at(const char *s, size_t at, char *buf, size_t len, const char *prefix)
{
    size_t from = at, to = at;
    while (from > 0 && ident_char(s[from - 1]))
        from--;
    while (ident_char(s[to]))
        to++;
    size_t n = to - from;
    static const char suffix[] = "_apply_functional";
    if (n > sizeof suffix - 1 && !strncmp(s + to - (sizeof suffix - 1), suffix, sizeof suffix - 1))
        n -= sizeof suffix - 1;
    snprintf(buf, len, "%s%.*s", prefix, (int)n, s + from);
}

bool frame_autograd_node(const char *name, char *buf, size_t len)
{
    const char *node = strstr(name, "Backward");
    if (!node || !strstr(name, "torch::autograd::"))
        return false;
    if (buf)
        identifier_at(name, (size_t)(node - name), buf, len, "autograd ");
    return true;
}

bool frame_aten_op(const char *name, char *buf, size_t len)
{
    const char *ops = strstr(name, "at::_ops::");
    if (!ops || !ident_char(ops[10]))
        return false;
    if (buf)
        identifier_at(ops + 10, 0, buf, len, "aten::");
    return true;
}

const char *site_table_call(struct site_table *t, const char *caller, const char *callee)
{
    size_t a = strlen(caller), b = strlen(callee);
    char *text = malloc(a + 3 + b + 1);
    if (!text)
        return NULL;
    memcpy(text, caller, a);
    memcpy(text + a, " > ", 3);
    memcpy(text + a + 3, callee, b + 1);
    const char *site = intern(t, text, a + 3 + b);
    free(text);
    return site;
}

const char *site_table_frame(struct site_table *t, const char *filename, size_t len, int64_t line, const char *name)
{
    size_t base = len;
    while (base > 0 && !is_separator(filename[base - 1]))
        base--;
    char *text = NULL; /* BASENAME:LINE NAME */
    int n = asprintf(&text, "%.*s:%lld %s", (int)(len - base), filename + base, (long long)line, name);
    if (n < 0)
        return NULL;
    const char *site = intern(t, text, (size_t)n);
    free(text);
    return site;
}
