/* frame_site.h: where an allocation was made, from the stack PyTorch records with it (a list of
 * {filename, line, name}, innermost first): the user's own innermost frame, as "BASENAME:LINE NAME"
 * ("flex_opt.py:125 init_weight_list"; the base name after the last '/' or '\'). Frames that are not the
 * user's are skipped:
 * - native ones: any filename that is not Python source (not *.py, not a "<...>" pseudo-file), so C++
 *   ("??", "", *.cpp, *.cu, *.h), CPython's C (*.c) and objects (*.o) alike;
 * - Python of torch, of installed packages and of the standard library: a path through a directory
 *   torch, site-packages, dist-packages or torchinductor_* (inductor's generated code), lib/pythonX.Y
 *   or a Windows install's PythonXY\Lib; and <frozen ...>, <string>.
 * When every frame is skipped, the innermost skipped Python frame stands for the site (torch's own:
 * "memory.py:218 empty_cache"), else the innermost frame ("??:0 torch::unwind::unwind()": autograd's
 * engine thread records no Python). Sites are interned in a table that owns their text. */
#ifndef OOMLAB_FRAME_SITE_H
#define OOMLAB_FRAME_SITE_H

#include <stddef.h>
#include <stdint.h>

enum frame_kind {
    FRAME_NATIVE,  /* C, C++, the interpreter */
    FRAME_LIBRARY, /* Python of torch, installed packages, the standard library */
    FRAME_USER,
};

enum frame_kind frame_kind(const char *filename, size_t len);

struct site_table;

struct site_table *site_table_create(void); /* NULL: out of memory */
void site_table_free(struct site_table *t);
/* The interned site of one frame ("flex_opt.py:125 init_weight_list"); NULL when out of memory. */
const char *site_table_frame(struct site_table *t, const char *filename, size_t len, int64_t line, const char *name);

#endif
