/* frame_site.h: where an allocation was made, from the stack PyTorch records with it (a list of
 * {filename, line, name}, innermost first): the user's own innermost frame, as "BASENAME:LINE NAME"
 * (the base name after the last '/' or '\'), after the user's frame that called it when there is one:
 * "flex_opt.py:125 init_weight_list > pytorch_backend.py:190 allocate", so an allocation helper of the
 * user's own is named with the code that asked for the memory. A comprehension's or lambda's frame
 * ("<listcomp>", "<genexpr>", "<lambda>", ...; not "<module>") counts as the function it sits in. Frames
 * that are not the user's are skipped:
 * - native ones: any filename that is not Python source (not *.py, not a "<...>" pseudo-file), so C++
 *   ("??", "", *.cpp, *.cu, *.h), CPython's C (*.c) and objects (*.o) alike;
 * - Python of torch, of installed packages and of the standard library: a path through a directory
 *   torch, site-packages, dist-packages or torchinductor_* (inductor's generated code), lib/pythonX.Y
 *   or a Windows install's PythonXY\Lib; and <frozen ...>, <string>.
 * When every frame is skipped, the innermost skipped Python frame stands for the site (torch's own:
 * "memory.py:218 empty_cache"); without one (autograd's engine thread records no Python) the innermost
 * native frame that names an autograd node ("autograd DivBackward0": the backward op that allocated),
 * else one that names an ATen operator ("aten::sum_dim_IntList"), else the innermost frame ("??:0 torch::unwind::unwind()"). Sites are
 * interned in a table that owns their text. */
#ifndef OOMLAB_FRAME_SITE_H
#define OOMLAB_FRAME_SITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum frame_kind {
    FRAME_NATIVE,  /* C, C++, the interpreter */
    FRAME_LIBRARY, /* Python of torch, installed packages, the standard library */
    FRAME_USER,
};

enum frame_kind frame_kind(const char *filename, size_t len);
/* A user frame that belongs to the function around it: a comprehension's, a generator expression's or a
 * lambda's ("<dictcomp>"), not a module's ("<module>"). */
bool frame_is_inline(const char *name);

struct site_table;

struct site_table *site_table_create(void); /* NULL: out of memory */
void site_table_free(struct site_table *t);
/* The interned site of one frame ("flex_opt.py:125 init_weight_list"); NULL when out of memory. */
const char *site_table_frame(struct site_table *t, const char *filename, size_t len, int64_t line, const char *name);

/* Whether a native frame's name is an autograd node's apply ("torch::autograd::generated::DivBackward0::
 * apply(...)", "...SelectBackward0_apply_functional(...)"); if so and buf is given, its site ("autograd
 * DivBackward0"). */
bool frame_autograd_node(const char *name, char *buf, size_t len);
/* ... or an ATen operator's dispatch ("at::_ops::sum_dim_IntList::redispatch(...)": "aten::sum_dim_IntList"). */
bool frame_aten_op(const char *name, char *buf, size_t len);
/* The interned copy of text; NULL when out of memory. */
const char *site_table_text(struct site_table *t, const char *text);
/* "CALLER > CALLEE" of two interned sites, interned; NULL when out of memory. */
const char *site_table_call(struct site_table *t, const char *caller, const char *callee);

#endif
