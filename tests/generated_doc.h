/* generated_doc.h: the main of a test that a committed reference (a Markdown file in docs/) is exactly what its
 * printer prints from the loader's tables: `TEST --write FILE` regenerates it. */
#ifndef OOMLAB_GENERATED_DOC_H
#define OOMLAB_GENERATED_DOC_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

/* Everything f holds, NUL-terminated, in a malloc'd buffer (NULL if f is NULL); *len its length. */
static inline char *generated_doc_slurp(FILE *f, size_t *len)
{
    char *text = NULL;
    *len = 0;
    if (!f)
        return NULL;
    FILE *mem = open_memstream(&text, len);
    char buf[4096];
    for (size_t got; (got = fread(buf, 1, sizeof buf, f));)
        fwrite(buf, 1, got, mem);
    fclose(mem);
    fclose(f);
    return text;
}

/* The 1-based line where two texts first differ. */
static inline int generated_doc_first_difference(const char *a, const char *b)
{
    int line = 1;
    for (; *a && *a == *b; a++, b++)
        if (*a == '\n')
            line++;
    return line;
}

/* Checks `path` against print's output, which must contain each of must[0..nmust); with --write FILE
 * writes print's output there instead. */
static inline int generated_doc_main(int argc, char **argv, const char *path, void (*print)(FILE *f),
                                     const char *const *must, size_t nmust)
{
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        FILE *f = fopen(argv[2], "w");
        if (!f) {
            perror(argv[2]);
            return 1;
        }
        print(f);
        return fclose(f) ? 1 : 0;
    }
    char *generated = NULL;
    size_t glen = 0, clen = 0;
    FILE *mem = open_memstream(&generated, &glen);
    print(mem);
    fclose(mem);
    ok(glen > 1000, "the reference is generated (%zu bytes)", glen);
    for (size_t i = 0; i < nmust; i++)
        ok(strstr(generated, must[i]) != NULL, "it lists %s", must[i]);
    char *committed = generated_doc_slurp(fopen(path, "rb"), &clen);
    if (ok(committed != NULL, "%s exists", path)) {
        if (!ok(clen == glen && memcmp(committed, generated, glen) == 0, "%s equals the generated reference", path))
            diag("first difference at line %d; regenerate with: %s --write %s",
                 generated_doc_first_difference(committed, generated), argv[0], path);
    }
    free(committed);
    free(generated);
    return done_testing();
}

#endif
