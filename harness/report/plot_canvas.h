/* plot_canvas.h: what oomlab's pictures share (cairo): a canvas a picture is drawn on, once for its SVG
 * and once for its PNG (each written whole or not at all), or on a recording surface to inspect; text that remembers where it went, so a picture can place a
 * label only where it does not overlap another and a test can check that none do; the colour-blind-safe
 * palette of the categories (Paul Tol's "muted" scheme); axis ticks at round numbers; and byte and time
 * units chosen for the range shown. */
#ifndef OOMLAB_PLOT_CANVAS_H
#define OOMLAB_PLOT_CANVAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "program/program.h"
#include "report/cairo_lib.h"
#include "util/err.h"

#define PLOT_FONT "DejaVu Sans"

struct plot_label { /* a text as drawn, with its box */
    char text[160];
    double x, y, w, h;
};

struct plot_canvas {
    double width, height;
    cairo_surface_t *surface; /* what it draws on: the SVG's, the PNG's, or a recording */
    cairo_t *cr;
    struct plot_label *labels;
    size_t nlabels, labels_cap;
    bool failed; /* out of host memory recording labels */
};

struct plot_rgb {
    double r, g, b;
};

enum plot_align { PLOT_LEFT, PLOT_CENTER, PLOT_RIGHT };

struct plot_font {
    double size;
    bool bold;
};

/* How a picture draws itself on a canvas (of the size it was opened with), from data. */
typedef void (*plot_draw_fn)(struct plot_canvas *c, const void *data);

/* A white canvas of width x height pixels on a recording surface, draw called on it: its labels can be
 * inspected; close it after. 0, or -1 with e set. */
int plot_canvas_draw(struct plot_canvas *c, double width, double height, plot_draw_fn draw, const void *data,
                     struct err *e);
/* Draws the picture into BASE.svg and BASE.png (each drawn on its own surface, as replaying a recording
 * into cairo 1.16's SVG surface leaks its fonts), each file whole or not at all. */
int plot_canvas_write(double width, double height, plot_draw_fn draw, const void *data, const char *base,
                      struct err *e);
void plot_canvas_close(struct plot_canvas *c);
/* How many pairs of recorded labels overlap (0 in a picture that reads well). */
size_t plot_canvas_overlaps(const struct plot_canvas *c);

/* The width of text in font. */
double plot_text_width(struct plot_canvas *c, struct plot_font font, const char *text);
/* Whether text at (x, baseline y) would stay clear of every label drawn so far and inside the canvas. */
bool plot_text_fits(struct plot_canvas *c, struct plot_font font, enum plot_align align, double x, double y,
                    const char *text);
/* Draws text at (x, baseline y) in colour, and records it. */
void plot_text(struct plot_canvas *c, struct plot_font font, enum plot_align align, double x, double y,
               struct plot_rgb colour, const char *text);
/* text shortened with "..." to at most max_width (out: at least 8 bytes). */
void plot_text_clip(struct plot_canvas *c, struct plot_font font, const char *text, double max_width, char *out,
                    size_t len);

void plot_set_colour(struct plot_canvas *c, struct plot_rgb colour, double alpha);
void plot_fill_rect(struct plot_canvas *c, double x, double y, double w, double h, struct plot_rgb colour,
                    double alpha);
void plot_line(struct plot_canvas *c, double x0, double y0, double x1, double y1, struct plot_rgb colour,
               double width, bool dashed);

/* The category's colour, and the picture's other colours. */
struct plot_rgb plot_category_colour(enum category cat);
extern const struct plot_rgb PLOT_BLACK, PLOT_GREY, PLOT_LIGHT_GREY, PLOT_OOM, PLOT_FITS, PLOT_CAPACITY;

/* Round-number ticks from 0 up to at least max (max > 0): the step (1, 2 or 5 x 10^k of units), into
 * *step; returns the number of ticks after 0. */
int plot_ticks(double max, int target, double *step);

/* The unit a byte axis up to max is labelled in ("GiB", "MiB", "KiB" or "B") and its size. */
const char *plot_byte_unit(uint64_t max, double *unit);
/* The unit a time axis up to max seconds is labelled in ("s", "ms" or "us") and its size in seconds. */
const char *plot_time_unit(double max, double *unit);
/* A tick value without trailing zeros: "2.5", "10". */
void plot_tick_text(double v, char *buf, size_t len);

/* The byte axis left of the plot area x0..x1, y0 (top)..y1, whose top is ymax bytes: ticks at round
 * numbers with grid lines, the unit at (x0 - 8, unit_y), and the area's left and bottom edges. */
void plot_byte_axis(struct plot_canvas *c, double x0, double x1, double y0, double y1, double ymax, double unit_y);

/* A legend swatch at (x, y) (its top left, 14 px high) and its text; returns the y of the next row. */
enum plot_swatch { SWATCH_FILL, SWATCH_LINE, SWATCH_DASHED, SWATCH_OUTLINE };
double plot_legend_row(struct plot_canvas *c, double x, double y, enum plot_swatch kind, struct plot_rgb colour,
                       const char *text);

#endif
