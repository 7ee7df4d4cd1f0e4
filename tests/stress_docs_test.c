/* stress_docs_test.c: docs/stress-keys.md is exactly what stress_keys_print_markdown() prints, so the
 * reference cannot drift from the stress-profile loader's tables. `stress_docs.t --write FILE` regenerates it. */
#include <stdlib.h>

#include "stress/profile.h"
#include "tap.h"

#define DOCS "docs/stress-keys.md"

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        FILE *f = fopen(argv[2], "w");
        if (!f) {
            perror(argv[2]);
            return 1;
        }
        stress_keys_print_markdown(f);
        return fclose(f) ? 1 : 0;
    }
    char *generated = NULL, *committed = NULL;
    size_t glen = 0, clen = 0;
    FILE *mem = open_memstream(&generated, &glen);
    stress_keys_print_markdown(mem);
    fclose(mem);
    ok(strstr(generated, "| `occupancy` |") && strstr(generated, "| `sync_every` |") &&
           strstr(generated, "| `from_snapshot` |"),
       "it lists keys of churn, streams and sizes");
    FILE *f = fopen(DOCS, "rb");
    if (ok(f != NULL, DOCS " exists")) {
        mem = open_memstream(&committed, &clen);
        char buf[4096];
        for (size_t got; (got = fread(buf, 1, sizeof buf, f));)
            fwrite(buf, 1, got, mem);
        fclose(mem);
        fclose(f);
        if (!ok(clen == glen && memcmp(committed, generated, glen) == 0, DOCS " equals the generated reference"))
            diag("regenerate with: %s --write " DOCS, argv[0]);
    }
    free(committed);
    free(generated);
    return done_testing();
}
