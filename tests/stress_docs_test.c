/* stress_docs_test.c: docs/stress-keys.md is exactly what stress_keys_print_markdown() prints, so the
 * reference cannot drift from the stress-profile loader's tables. `stress_docs.t --write FILE` regenerates it. */
#include "generated_doc.h"
#include "stress/profile.h"

int main(int argc, char **argv)
{
    static const char *const must[] = {"| `occupancy` |", "| `sync_every` |", "| `from_snapshot` |"};
    return generated_doc_main(argc, argv, "docs/stress-keys.md", stress_keys_print_markdown, must,
                              sizeof must / sizeof must[0]);
}
