/* gen_names_test.c: the generator's names made without printf: gen_dotted joins two parts with a dot and
 * cuts the result to its buffer as snprintf("%s.%s") would; gen_push and gen_tag build the module scope
 * and the interned tags under it. */
#include <string.h>

#include "tap.h"
#include "workload/gen.h"
#include "workload/strpool.h"

static void dotted(void)
{
    char buf[16];
    is_str(gen_dotted(buf, sizeof buf, "norm2", "scale"), "norm2.scale", "two parts and a dot");
    is_str(gen_dotted(buf, sizeof buf, "", "shift"), ".shift", "an empty first part keeps the dot");
    is_str(gen_dotted(buf, sizeof buf, "gate", ""), "gate.", "an empty second part too");
    is_str(gen_dotted(buf, sizeof buf, "norm1_context.no", "scale"), "norm1_context.n",
           "a first part of 16 characters is cut to 15, with no room for the dot");
    is_str(gen_dotted(buf, sizeof buf, "norm1_context.", "scale"), "norm1_context..",
           "a first part of 14 leaves room for the dot only");
    is_str(gen_dotted(buf, sizeof buf, "norm1", "context.residual"), "norm1.context.r", "the second part is cut");
    char tiny[1];
    is_str(gen_dotted(tiny, sizeof tiny, "a", "b"), "", "a one-byte buffer holds the empty string");
    is_str(gen_dotted(buf, sizeof buf, "transformer", "residual"), "transformer.res",
           "cut as snprintf(\"%%s.%%s\") cuts it");
}

static void scopes(void)
{
    struct err e = {0};
    struct gen g = {.e = &e, .pool = strpool_create()};
    if (!ok(g.pool != NULL, "a string pool"))
        return;
    gen_push(&g, "%s", "transformer_blocks");
    gen_push(&g, "%d", 12);
    gen_push(&g, "attn.%s%d", "to_q", -3);
    is_str(gen_tag(&g, "weight"), "transformer_blocks.12.attn.to_q-3.weight", "scope parts by %%s and %%d, and a leaf");
    ok(gen_tag(&g, "weight") == gen_tag(&g, "weight"), "  interned: the same pointer twice");
    gen_pop(&g);
    is_str(gen_tag(&g, NULL), "transformer_blocks.12", "gen_pop takes the last part off");
    gen_push(&g, "%5.2f", 1.5);
    is_str(gen_tag(&g, ""), "transformer_blocks.12. 1.50", "other conversions go through vsnprintf");
    gen_pop(&g);
    gen_pop(&g);
    gen_pop(&g);
    gen_pop(&g); /* one more than pushed: nothing to undo */
    is_str(gen_tag(&g, "x"), "x", "with no scope, the leaf alone");
    is_int(g.failed, 0, "nothing failed");
    strpool_destroy(g.pool);
}

int main(void)
{
    dotted();
    scopes();
    return done_testing();
}
