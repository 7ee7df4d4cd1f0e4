/* scenario_docs_test.c: docs/scenario-keys.md is exactly what scenario_keys_print_markdown() prints, so
 * the reference cannot drift from the loader's tables. `scenario_docs.t --write FILE` regenerates it. */
#include <stdlib.h>

#include "scenario/scenario.h"
#include "tap.h"

#define DOCS "docs/scenario-keys.md"

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    for (;;) {
        if (*len + 4096 > cap) {
            char *grown = realloc(buf, cap = cap ? cap * 2 : 65536);
            if (!grown) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        size_t got = fread(buf + *len, 1, cap - *len - 1, f);
        *len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[*len] = 0;
    return buf;
}

/* The 1-based line where two texts first differ. */
static int first_difference(const char *a, const char *b)
{
    int line = 1;
    for (; *a && *a == *b; a++, b++)
        if (*a == '\n')
            line++;
    return line;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        FILE *f = fopen(argv[2], "w");
        if (!f) {
            perror(argv[2]);
            return 1;
        }
        scenario_keys_print_markdown(f);
        return fclose(f) ? 1 : 0;
    }
    char *generated = NULL;
    size_t glen = 0, flen = 0;
    FILE *mem = open_memstream(&generated, &glen);
    scenario_keys_print_markdown(mem);
    fclose(mem);
    ok(glen > 1000, "the reference is generated (%zu bytes)", glen);
    ok(strstr(generated, "| `batch_size` |") && strstr(generated, "| `peak_reserved_max` |"),
       "it lists keys of the job and of expect");
    char *committed = read_file(DOCS, &flen);
    if (ok(committed != NULL, DOCS " exists")) {
        int same = flen == glen && memcmp(committed, generated, glen) == 0;
        if (!ok(same, DOCS " equals the generated reference"))
            diag("first difference at line %d; regenerate with: %s --write " DOCS,
                 first_difference(committed, generated), argv[0]);
    }
    free(committed);
    free(generated);
    return done_testing();
}
