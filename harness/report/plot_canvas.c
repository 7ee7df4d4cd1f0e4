/* plot_canvas.c: the canvas, text, palette and axes oomlab's pictures share (see plot_canvas.h). */
#include "report/plot_canvas.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "util/output.h"
#include "util/size.h"
#include "util/vec.h"

#define RGB(hex) {((hex) >> 16 & 0xff) / 255.0, ((hex) >> 8 & 0xff) / 255.0, ((hex) & 0xff) / 255.0}

/* Paul Tol's muted scheme (colour-blind safe), in the stacking order of enum category: neighbours differ
 * in lightness as well as hue. */
static const struct plot_rgb category_colours[CAT_COUNT] = {
    [CAT_PARAM] = RGB(0x332288),      /* indigo */
    [CAT_GRAD] = RGB(0x88CCEE),       /* cyan */
    [CAT_OPTIMIZER_STATE] = RGB(0x117733), /* green */
    [CAT_EMA] = RGB(0x999933),        /* olive */
    [CAT_ACTIVATION] = RGB(0xDDCC77), /* sand */
    [CAT_TEMP] = RGB(0xCC6677),       /* rose */
    [CAT_WORKSPACE] = RGB(0x882255),  /* wine */
    [CAT_INPUT] = RGB(0x44AA99),      /* teal */
    [CAT_OUTPUT] = RGB(0xAA4499),     /* purple */
    [CAT_OTHER] = RGB(0xBBBBBB),      /* grey */
};

const struct plot_rgb PLOT_BLACK = RGB(0x222222), PLOT_GREY = RGB(0x666666), PLOT_LIGHT_GREY = RGB(0xDDDDDD),
                      PLOT_OOM = RGB(0xD55E00), PLOT_FITS = RGB(0x0072B2), PLOT_CAPACITY = RGB(0xAA3377);

struct plot_rgb plot_category_colour(enum category cat)
{
    return category_colours[cat < CAT_COUNT ? cat : CAT_OTHER];
}

/* A white canvas on surface (the canvas takes its reference). */
static int canvas_on(struct plot_canvas *c, cairo_surface_t *surface, double width, double height, struct err *e)
{
    *c = (struct plot_canvas){.width = width, .height = height, .surface = surface};
    c->cr = cairo_create(surface);
    if (cairo_status(c->cr) != CAIRO_STATUS_SUCCESS) {
        plot_canvas_close(c);
        return err_set(e, ERR_INTERNAL, "cannot start a drawing: out of host memory");
    }
    cairo_set_source_rgb(c->cr, 1, 1, 1);
    cairo_paint(c->cr);
    return 0;
}

int plot_canvas_draw(struct plot_canvas *c, double width, double height, plot_draw_fn draw, const void *data,
                     struct err *e)
{
    if (cairo_lib_load(e))
        return -1;
    cairo_surface_t *rec =
        cairo_recording_surface_create(CAIRO_CONTENT_COLOR_ALPHA, &(cairo_rectangle_t){0, 0, width, height});
    if (canvas_on(c, rec, width, height, e))
        return -1;
    draw(c, data);
    return c->failed ? err_set(e, ERR_INTERNAL, "out of host memory drawing a picture") : 0;
}

void plot_canvas_close(struct plot_canvas *c)
{
    if (c->cr)
        cairo_destroy(c->cr);
    if (c->surface)
        cairo_surface_destroy(c->surface);
    free(c->labels);
    *c = (struct plot_canvas){0};
}

static cairo_status_t write_stream(void *closure, const unsigned char *data, unsigned int n)
{
    return fwrite(data, 1, n, closure) == n ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* The picture drawn on a new surface of the file's kind, written to f. */
static cairo_status_t draw_into(bool svg, double width, double height, plot_draw_fn draw, const void *data, FILE *f)
{
    cairo_surface_t *s;
    if (svg) {
        s = cairo_svg_surface_create_for_stream(write_stream, f, width, height);
        cairo_svg_surface_restrict_to_version(s, CAIRO_SVG_VERSION_1_1);
    } else {
        s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)ceil(width), (int)ceil(height));
    }
    struct plot_canvas c;
    if (canvas_on(&c, s, width, height, &(struct err){0}))
        return CAIRO_STATUS_NO_MEMORY;
    draw(&c, data);
    cairo_status_t st = c.failed ? CAIRO_STATUS_NO_MEMORY : cairo_status(c.cr);
    cairo_destroy(c.cr);
    c.cr = NULL;
    if (st == CAIRO_STATUS_SUCCESS && svg) {
        cairo_surface_finish(s);
        st = cairo_surface_status(s);
    } else if (st == CAIRO_STATUS_SUCCESS) {
        st = cairo_surface_write_to_png_stream(s, write_stream, f);
    }
    plot_canvas_close(&c);
    return st;
}

int plot_canvas_write(double width, double height, plot_draw_fn draw, const void *data, const char *base,
                      struct err *e)
{
    if (cairo_lib_load(e))
        return -1;
    for (int svg = 1; svg >= 0; svg--) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s.%s", base, svg ? "svg" : "png") >= (int)sizeof path)
            return err_set(e, ERR_INPUT, "%s: path too long", base);
        struct output af;
        if (output_open(&af, path, e))
            return -1;
        cairo_status_t st = draw_into(svg, width, height, draw, data, af.f);
        if (st != CAIRO_STATUS_SUCCESS) {
            output_abort(&af);
            return err_set(e, st == CAIRO_STATUS_WRITE_ERROR ? ERR_INPUT : ERR_INTERNAL, "%s: cannot write: %s",
                           path, cairo_status_to_string(st));
        }
        if (output_commit(&af, e))
            return -1;
    }
    return 0;
}

static void set_font(struct plot_canvas *c, struct plot_font font)
{
    cairo_select_font_face(c->cr, PLOT_FONT, CAIRO_FONT_SLANT_NORMAL,
                           font.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(c->cr, font.size);
}

double plot_text_width(struct plot_canvas *c, struct plot_font font, const char *text)
{
    cairo_text_extents_t ext;
    set_font(c, font);
    cairo_text_extents(c->cr, text, &ext);
    return ext.x_advance;
}

/* The box text takes at (x, baseline y): the font's ascent and descent, not the glyphs', so rows of
 * labels are compared alike. */
static struct plot_label box_of(struct plot_canvas *c, struct plot_font font, enum plot_align align, double x,
                                double y, const char *text)
{
    struct plot_label l;
    snprintf(l.text, sizeof l.text, "%s", text);
    cairo_font_extents_t fe;
    l.w = plot_text_width(c, font, text);
    cairo_font_extents(c->cr, &fe);
    l.x = align == PLOT_LEFT ? x : align == PLOT_CENTER ? x - l.w / 2 : x - l.w;
    l.y = y - fe.ascent;
    l.h = fe.ascent + fe.descent;
    return l;
}

static bool overlap(const struct plot_label *a, const struct plot_label *b)
{
    return a->x < b->x + b->w && b->x < a->x + a->w && a->y < b->y + b->h && b->y < a->y + a->h;
}

bool plot_text_fits(struct plot_canvas *c, struct plot_font font, enum plot_align align, double x, double y,
                    const char *text)
{
    struct plot_label l = box_of(c, font, align, x, y, text);
    if (l.x < 0 || l.y < 0 || l.x + l.w > c->width || l.y + l.h > c->height)
        return false;
    for (size_t i = 0; i < c->nlabels; i++)
        if (overlap(&l, &c->labels[i]))
            return false;
    return true;
}

void plot_text(struct plot_canvas *c, struct plot_font font, enum plot_align align, double x, double y,
               struct plot_rgb colour, const char *text)
{
    struct plot_label l = box_of(c, font, align, x, y, text);
    if (vec_grow((void **)&c->labels, &c->labels_cap, c->nlabels + 1, sizeof *c->labels))
        c->failed = true;
    else
        c->labels[c->nlabels++] = l;
    plot_set_colour(c, colour, 1);
    cairo_move_to(c->cr, l.x, y);
    cairo_show_text(c->cr, text);
}

void plot_text_clip(struct plot_canvas *c, struct plot_font font, const char *text, double max_width, char *out,
                    size_t len)
{
    snprintf(out, len, "%s", text);
    size_t n = strlen(out);
    if (plot_text_width(c, font, out) <= max_width)
        return;
    while (n > 0) {
        n--;
        while (n > 0 && (out[n] & 0xC0) == 0x80) /* whole UTF-8 characters */
            n--;
        if (n + 4 > len)
            continue;
        memcpy(out + n, "...", 4);
        if (plot_text_width(c, font, out) <= max_width)
            return;
    }
    snprintf(out, len, "...");
}

void plot_set_colour(struct plot_canvas *c, struct plot_rgb colour, double alpha)
{
    cairo_set_source_rgba(c->cr, colour.r, colour.g, colour.b, alpha);
}

void plot_fill_rect(struct plot_canvas *c, double x, double y, double w, double h, struct plot_rgb colour,
                    double alpha)
{
    plot_set_colour(c, colour, alpha);
    cairo_rectangle(c->cr, x, y, w, h);
    cairo_fill(c->cr);
}

void plot_line(struct plot_canvas *c, double x0, double y0, double x1, double y1, struct plot_rgb colour,
               double width, bool dashed)
{
    static const double dash[] = {6, 4};
    plot_set_colour(c, colour, 1);
    cairo_set_line_width(c->cr, width);
    cairo_set_dash(c->cr, dash, dashed ? 2 : 0, 0);
    cairo_move_to(c->cr, x0, y0);
    cairo_line_to(c->cr, x1, y1);
    cairo_stroke(c->cr);
    cairo_set_dash(c->cr, NULL, 0, 0);
}

size_t plot_canvas_overlaps(const struct plot_canvas *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->nlabels; i++)
        for (size_t k = i + 1; k < c->nlabels; k++)
            n += overlap(&c->labels[i], &c->labels[k]);
    return n;
}

int plot_ticks(double max, int target, double *step)
{
    double raw = max / (target > 0 ? target : 1), mag = pow(10, floor(log10(raw))), f = raw / mag;
    *step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
    return (int)ceil(max / *step - 1e-9);
}

const char *plot_byte_unit(uint64_t max, double *unit)
{
    static const struct {
        const char *name;
        uint64_t size;
    } units[] = {{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (max >= 2 * units[i].size) {
            *unit = (double)units[i].size;
            return units[i].name;
        }
    *unit = 1;
    return "B";
}

const char *plot_time_unit(double max, double *unit)
{
    *unit = max >= 2 ? 1 : max >= 2e-3 ? 1e-3 : 1e-6;
    return max >= 2 ? "s" : max >= 2e-3 ? "ms" : "us";
}

void plot_tick_text(double v, char *buf, size_t len)
{
    snprintf(buf, len, "%.3f", v);
    char *dot = strchr(buf, '.');
    if (!dot)
        return;
    char *end = buf + strlen(buf) - 1;
    while (end > dot && *end == '0')
        *end-- = '\0';
    if (end == dot)
        *end = '\0';
}

void plot_byte_axis(struct plot_canvas *c, double x0, double x1, double y0, double y1, double ymax, double unit_y)
{
    double unit, step;
    const char *name = plot_byte_unit((uint64_t)ymax, &unit);
    int n = plot_ticks(ymax / unit, 6, &step);
    for (int i = 0; i <= n; i++) {
        double y = y1 - (y1 - y0) * i * step * unit / ymax;
        if (y < y0 - 0.5)
            break;
        if (i)
            plot_line(c, x0, y, x1, y, PLOT_LIGHT_GREY, 0.8, false);
        char buf[32];
        plot_tick_text(i * step, buf, sizeof buf);
        plot_text(c, (struct plot_font){12, false}, PLOT_RIGHT, x0 - 8, y + 4, PLOT_BLACK, buf);
    }
    plot_text(c, (struct plot_font){13, false}, PLOT_RIGHT, x0 - 8, unit_y, PLOT_BLACK, name);
    plot_line(c, x0, y1, x1, y1, PLOT_BLACK, 1, false);
    plot_line(c, x0, y0, x0, y1, PLOT_BLACK, 1, false);
}

double plot_legend_row(struct plot_canvas *c, double x, double y, enum plot_swatch kind, struct plot_rgb colour,
                       const char *text)
{
    switch (kind) {
    case SWATCH_FILL: plot_fill_rect(c, x, y, 22, 14, colour, 1); break;
    case SWATCH_LINE: plot_line(c, x, y + 7, x + 22, y + 7, colour, 2, false); break;
    case SWATCH_DASHED: plot_line(c, x, y + 7, x + 22, y + 7, colour, 2, true); break;
    case SWATCH_OUTLINE:
        plot_set_colour(c, colour, 1);
        cairo_set_line_width(c->cr, 1.5);
        cairo_rectangle(c->cr, x + 0.75, y + 0.75, 20.5, 12.5);
        cairo_stroke(c->cr);
        break;
    }
    struct plot_font font = {12.5, false};
    char clipped[160];
    plot_text_clip(c, font, text, c->width - x - 30 - 6, clipped, sizeof clipped);
    plot_text(c, font, PLOT_LEFT, x + 30, y + 12, PLOT_BLACK, clipped);
    return y + 22;
}
