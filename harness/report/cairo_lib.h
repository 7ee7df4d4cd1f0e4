/* cairo_lib.h: cairo opened on first use (util/lazy_lib.h), so that a run without pictures does not map cairo and
 * the dozen libraries it brings (X11, fontconfig, freetype, pixman, png: about 1 ms of every process's
 * start). Include this instead of <cairo.h>: each cairo function oomlab calls is a pointer in cairo_lib,
 * and the function's name stands for that pointer, so calls read as plain cairo. Call cairo_lib_load
 * (cheap once loaded) before the first cairo call. */
#ifndef OOMLAB_CAIRO_LIB_H
#define OOMLAB_CAIRO_LIB_H

#include <cairo.h>
#include <cairo-svg.h>

#include "util/err.h"

#define CAIRO_LIB_FUNCTIONS(X)                                                                               \
    X(cairo_close_path) X(cairo_create) X(cairo_destroy) X(cairo_fill) X(cairo_font_extents)                 \
    X(cairo_image_surface_create) X(cairo_line_to) X(cairo_move_to) X(cairo_paint)                           \
    X(cairo_recording_surface_create) X(cairo_rectangle) X(cairo_restore) X(cairo_save)                      \
    X(cairo_select_font_face) X(cairo_set_antialias) X(cairo_set_dash) X(cairo_set_font_size)                \
    X(cairo_set_line_join) X(cairo_set_line_width) X(cairo_set_source_rgb) X(cairo_set_source_rgba)          \
    X(cairo_show_text) X(cairo_status) X(cairo_status_to_string) X(cairo_stroke)                             \
    X(cairo_surface_destroy) X(cairo_surface_finish) X(cairo_surface_status)                                 \
    X(cairo_surface_write_to_png_stream) X(cairo_svg_surface_create_for_stream)                              \
    X(cairo_svg_surface_restrict_to_version) X(cairo_text_extents)

#define CAIRO_LIB_MEMBER(f) __typeof__(f) *f;
struct cairo_lib {
    CAIRO_LIB_FUNCTIONS(CAIRO_LIB_MEMBER)
};
#undef CAIRO_LIB_MEMBER
extern struct cairo_lib cairo_lib;

/* 0, or -1 with e set when cairo cannot be loaded (its soname, libcairo.so.2, not found or incomplete). */
int cairo_lib_load(struct err *e);

/* From here on, cairo_create(...) is cairo_lib.cairo_create(...) (a macro does not expand inside itself);
 * cairo_lib.c, which fills the table, goes without. */
#ifndef CAIRO_LIB_FILL
#define cairo_close_path cairo_lib.cairo_close_path
#define cairo_create cairo_lib.cairo_create
#define cairo_destroy cairo_lib.cairo_destroy
#define cairo_fill cairo_lib.cairo_fill
#define cairo_font_extents cairo_lib.cairo_font_extents
#define cairo_image_surface_create cairo_lib.cairo_image_surface_create
#define cairo_line_to cairo_lib.cairo_line_to
#define cairo_move_to cairo_lib.cairo_move_to
#define cairo_paint cairo_lib.cairo_paint
#define cairo_recording_surface_create cairo_lib.cairo_recording_surface_create
#define cairo_rectangle cairo_lib.cairo_rectangle
#define cairo_restore cairo_lib.cairo_restore
#define cairo_save cairo_lib.cairo_save
#define cairo_select_font_face cairo_lib.cairo_select_font_face
#define cairo_set_antialias cairo_lib.cairo_set_antialias
#define cairo_set_dash cairo_lib.cairo_set_dash
#define cairo_set_font_size cairo_lib.cairo_set_font_size
#define cairo_set_line_join cairo_lib.cairo_set_line_join
#define cairo_set_line_width cairo_lib.cairo_set_line_width
#define cairo_set_source_rgb cairo_lib.cairo_set_source_rgb
#define cairo_set_source_rgba cairo_lib.cairo_set_source_rgba
#define cairo_show_text cairo_lib.cairo_show_text
#define cairo_status cairo_lib.cairo_status
#define cairo_status_to_string cairo_lib.cairo_status_to_string
#define cairo_stroke cairo_lib.cairo_stroke
#define cairo_surface_destroy cairo_lib.cairo_surface_destroy
#define cairo_surface_finish cairo_lib.cairo_surface_finish
#define cairo_surface_status cairo_lib.cairo_surface_status
#define cairo_surface_write_to_png_stream cairo_lib.cairo_surface_write_to_png_stream
#define cairo_svg_surface_create_for_stream cairo_lib.cairo_svg_surface_create_for_stream
#define cairo_svg_surface_restrict_to_version cairo_lib.cairo_svg_surface_restrict_to_version
#define cairo_text_extents cairo_lib.cairo_text_extents
#endif

#endif
