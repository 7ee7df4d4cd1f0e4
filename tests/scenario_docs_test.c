/* scenario_docs_test.c: docs/scenario-keys.md is exactly what scenario_keys_print_markdown() prints, so
 * the reference cannot drift from the loader's tables. `scenario_docs.t --write FILE` regenerates it. */
#include "generated_doc.h"
#include "scenario/scenario.h"

int main(int argc, char **argv)
{
    static const char *const must[] = {"| `batch_size` |", "| `peak_reserved_max` |"};
    return generated_doc_main(argc, argv, "docs/scenario-keys.md", scenario_keys_print_markdown, must,
                              sizeof must / sizeof must[0]);
}
