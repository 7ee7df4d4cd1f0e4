/* gen_names_test.c: the generator's names made without printf: gen_dotted joins two parts with a dot and
 * cuts the result to its buffer as snprintf("%s.%s") would; gen_push and gen_tag build the module scope
 * and the interned tags under it (the scope's own tag kept until the scope changes); gen_tag_is tells a
 * tag equal to what gen_tag would give, without building it. */
#include <stdio.h>
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

static void scope_tags(void)
{
    struct err e = {0};
    struct gen g = {.e = &e, .pool = strpool_create()};
    if (!ok(g.pool != NULL, "a string pool"))
        return;
    is_str(gen_tag(&g, NULL), "", "no scope: the empty tag");
    gen_push(&g, "%s", "blocks");
    is_str(gen_tag(&g, NULL), "blocks", "after a push: the new scope, not the one kept before");
    gen_push(&g, "%d", 0);
    const char *inner = gen_tag(&g, NULL);
    is_str(inner, "blocks.0", "pushed again");
    ok(gen_tag(&g, "") == inner, "  kept: the same pointer");
    gen_pop(&g);
    is_str(gen_tag(&g, NULL), "blocks", "after a pop: the outer scope again");
    gen_push(&g, "%d", 1);
    is_str(gen_tag(&g, NULL), "blocks.1", "a sibling scope of the same length");
    ok(gen_tag_is(&g, gen_tag(&g, "weight"), "weight"), "gen_tag_is: the tag gen_tag gives");
    ok(gen_tag_is(&g, "blocks.1.weight", "weight"), "  equal text, not only the same pointer");
    ok(!gen_tag_is(&g, "blocks.0.weight", "weight"), "  another scope");
    ok(!gen_tag_is(&g, "blocks.1.bias", "weight"), "  another leaf");
    ok(!gen_tag_is(&g, "blocks.1.weigh", "weight"), "  a leaf cut short");
    ok(!gen_tag_is(&g, "blocks.1.weights", "weight"), "  a longer leaf");
    ok(!gen_tag_is(&g, "blocks.1", "weight"), "  the scope alone");
    ok(!gen_tag_is(&g, "blocks.1_weight", "weight"), "  no dot after the scope");
    ok(!gen_tag_is(&g, "blocks", "weight"), "  shorter than the scope");
    ok(gen_tag_is(&g, "blocks.1", NULL) && gen_tag_is(&g, "blocks.1", ""), "  no leaf: the scope itself");
    char leaf[700];
    memset(leaf, 'w', sizeof leaf - 1);
    leaf[sizeof leaf - 1] = 0;
    const char *cut = gen_tag(&g, leaf);
    ok(strlen(cut) == 639 && !gen_tag_is(&g, cut, leaf), "a tag gen_tag cut to 639 characters is not the leaf's");
    gen_pop(&g);
    gen_pop(&g);
    ok(gen_tag_is(&g, "weight", "weight") && !gen_tag_is(&g, ".weight", "weight"), "no scope: the leaf alone");
    char name[300];
    memset(name, 'p', sizeof name - 1);
    name[sizeof name - 1] = 0;
    gen_push(&g, "%s", name);
    const char *plain = gen_tag(&g, NULL);
    gen_pop(&g);
    gen_push(&g, "%s%s", name, "");
    ok(strlen(plain) == 255 && gen_tag(&g, NULL) == plain, "a part of 299 characters is cut to 255, by \"%%s\" as by other formats");
    gen_pop(&g);
    gen_push(&g, "blocks.%d.attn", 7);
    is_str(gen_tag(&g, NULL), "blocks.7.attn", "plain text before and after a %%d (copied a run at a time)");
    gen_pop(&g);
    char longfmt[300], want[256];
    memset(longfmt, 'q', 297);
    strcpy(longfmt + 297, "%d");
    gen_push(&g, longfmt, 5);
    snprintf(want, sizeof want, longfmt, 5);
    is_str(gen_tag(&g, NULL), want, "a run of 297 characters and a %%d: cut to 255 as snprintf cuts it");
    gen_pop(&g);
    is_int(g.failed, 0, "nothing failed");
    strpool_destroy(g.pool);
}

int main(void)
{
    dotted();
    scopes();
    scope_tags();
    return done_testing();
}
