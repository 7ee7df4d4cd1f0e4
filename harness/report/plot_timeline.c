/* plot_timeline.c: a run's memory timeline (see plot.h): allocated bytes stacked by category, reserved as a
 * line, the capacity dashed, phases as coloured bands (a strip above the plot, a tint behind it), steps as
 * dotted lines, each OOM as a line with what it asked for. Each point of the timeline is drawn from its
 * first op to the next point's, at its maximum, so the picture is the run's upper envelope. */
#include <stdio.h>
#include <string.h>

#include "report/plot.h"
#include "util/size.h"

#define WIDTH 1200
#define HEIGHT 660
#define LEFT 78
#define RIGHT 236 /* the legend's column */
#define TOP 104   /* below the title, subtitle and phase strip */
#define BOTTOM 64
#define STRIP 22  /* the phase strip's height */

static const struct plot_font TITLE = {18, true}, SUBTITLE = {13, false}, TICK = {12, false}, SMALL = {11.5, false},
                              AXIS = {13, false}, MARK = {12.5, true};

struct frame {
    double x0, x1, y0, y1; /* the plot area: y0 the top */
    double xmax, ymax;     /* the data at its right and top edges */
    bool timed;            /* x is kernel time (else ops) */
};

static double x_of(const struct frame *f, double v)
{
    return f->x0 + (f->x1 - f->x0) * (f->xmax > 0 ? v / f->xmax : 0);
}

static double y_of(const struct frame *f, double bytes)
{
    return f->y1 - (f->y1 - f->y0) * (f->ymax > 0 ? bytes / f->ymax : 0);
}

static double point_x(const struct frame *f, const struct timeline_point *p)
{
    return x_of(f, f->timed ? p->first_s : (double)p->first_op);
}

/* Where point i's value ends: where the next begins, or the end of the run. */
static double point_end_x(const struct frame *f, const struct timeline_view *v, size_t i)
{
    if (i + 1 < v->npoints)
        return point_x(f, &v->points[i + 1]);
    return x_of(f, f->timed ? v->end_s : (double)v->end_op);
}

/* Light tints for the phases oomlab generates (Paul Tol's "light" scheme), grey for others. */
static struct plot_rgb phase_colour(const char *name)
{
    static const struct {
        const char *name;
        struct plot_rgb colour;
    } tints[] = {
        {"load", {0.867, 0.867, 0.867}},     {"forward", {0.467, 0.667, 0.867}}, {"backward", {0.933, 0.533, 0.400}},
        {"optimizer", {0.267, 0.733, 0.600}}, {"ema", {0.733, 0.800, 0.200}},    {"eval", {0.933, 0.867, 0.533}},
        {"decode", {1.000, 0.667, 0.733}},   {"zero_grad", {0.600, 0.600, 0.200}},
    };
    for (size_t i = 0; i < sizeof tints / sizeof tints[0]; i++)
        if (!strncmp(name, tints[i].name, strlen(tints[i].name)))
            return tints[i].colour;
    return (struct plot_rgb){0.600, 0.867, 1.000};
}

/* The categories that hold bytes at some point. */
static unsigned categories_used(const struct timeline_view *v)
{
    unsigned used = 0;
    for (size_t i = 0; i < v->npoints; i++)
        for (int k = 0; k < CAT_COUNT; k++)
            if (v->points[i].category[k])
                used |= 1u << k;
    return used;
}

/* A phase's name where the band is too narrow for it, or NULL. */
static const char *short_name(const char *name)
{
    static const char *const shorts[][2] = {
        {"forward", "fwd"}, {"backward", "bwd"}, {"optimizer", "opt"}, {"decode", "dec"}, {"load", "ld"},
        {"zero_grad", "zg"},
    };
    for (size_t i = 0; i < sizeof shorts / sizeof shorts[0]; i++)
        if (!strcmp(name, shorts[i][0]))
            return shorts[i][1];
    return NULL;
}

static double span_end_x(const struct frame *f, const struct timeline_view *v, const struct timeline_span *s)
{
    return x_of(f, f->timed ? s->end_s : (double)timeline_span_end_op(v, s));
}

static void draw_phases(struct plot_canvas *c, const struct frame *f, const struct timeline_view *v)
{
    double top = f->y0 - STRIP - 4;
    for (size_t i = 0; i < v->nspans; i++) {
        const struct timeline_span *s = &v->spans[i];
        double a = x_of(f, f->timed ? s->start_s : (double)s->first_op), b = span_end_x(f, v, s);
        if (b <= a)
            continue;
        struct plot_rgb tint = phase_colour(s->name);
        plot_fill_rect(c, a, f->y0, b - a, f->y1 - f->y0, tint, 0.22);
        plot_fill_rect(c, a, top, b - a, STRIP, tint, 1);
    }
    for (size_t i = 0; i < v->nspans; i++) { /* names where they fit, after every band is down */
        const struct timeline_span *s = &v->spans[i];
        double a = x_of(f, f->timed ? s->start_s : (double)s->first_op), b = span_end_x(f, v, s);
        const char *names[] = {s->name, short_name(s->name)};
        for (int k = 0; k < 2 && names[k]; k++)
            if (b - a > plot_text_width(c, SMALL, names[k]) + 6 &&
                plot_text_fits(c, SMALL, PLOT_CENTER, (a + b) / 2, top + 15.5, names[k])) {
                plot_text(c, SMALL, PLOT_CENTER, (a + b) / 2, top + 15.5, PLOT_BLACK, names[k]);
                break;
            }
    }
    if (v->nspans)
        plot_text(c, SMALL, PLOT_RIGHT, f->x0 - 6, top + 15.5, PLOT_GREY, "phase");
}

static void draw_steps(struct plot_canvas *c, const struct frame *f, const struct timeline_view *v)
{
    for (size_t i = 0; i < v->nsteps; i++) {
        double x = x_of(f, f->timed ? v->steps[i].at_s : (double)v->steps[i].op);
        plot_line(c, x, f->y0, x, f->y1, PLOT_GREY, 1, true);
        char label[32];
        snprintf(label, sizeof label, "step %lld", (long long)v->steps[i].step);
        if (plot_text_fits(c, SMALL, PLOT_LEFT, x + 4, f->y0 + 14, label))
            plot_text(c, SMALL, PLOT_LEFT, x + 4, f->y0 + 14, PLOT_GREY, label);
    }
}

/* The area under the cumulative bytes of categories 0..top, as steps: each point's value holds until the
 * next point begins. */
static void stacked_path(struct plot_canvas *c, const struct frame *f, const struct timeline_view *v, int top)
{
    cairo_t *cr = c->cr;
    cairo_move_to(cr, point_x(f, &v->points[0]), f->y1);
    for (size_t i = 0; i < v->npoints; i++) {
        const struct timeline_point *p = &v->points[i];
        double sum = 0;
        for (int k = 0; k <= top; k++)
            sum += (double)p->category[k];
        cairo_line_to(cr, point_x(f, p), y_of(f, sum));
        cairo_line_to(cr, point_end_x(f, v, i), y_of(f, sum));
    }
    cairo_line_to(cr, point_end_x(f, v, v->npoints - 1), f->y1);
    cairo_close_path(cr);
}

static void draw_memory(struct plot_canvas *c, const struct frame *f, const struct timeline_view *v, unsigned used)
{
    for (int k = CAT_COUNT - 1; k >= 0; k--) {
        if (!(used & 1u << k))
            continue;
        stacked_path(c, f, v, k);
        plot_set_colour(c, plot_category_colour((enum category)k), 1);
        cairo_fill(c->cr);
    }
    cairo_t *cr = c->cr;
    for (size_t i = 0; i < v->npoints; i++) { /* reserved */
        const struct timeline_point *p = &v->points[i];
        double next = point_end_x(f, v, i);
        if (i == 0)
            cairo_move_to(cr, point_x(f, p), y_of(f, (double)p->reserved));
        else
            cairo_line_to(cr, point_x(f, p), y_of(f, (double)p->reserved));
        cairo_line_to(cr, next, y_of(f, (double)p->reserved));
    }
    plot_set_colour(c, PLOT_BLACK, 1);
    cairo_set_line_width(cr, 1.6);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_MITER);
    cairo_stroke(cr);
}

static void draw_axes(struct plot_canvas *c, const struct frame *f, const struct job_result *r)
{
    plot_byte_axis(c, f->x0, f->x1, f->y0, f->y1, f->ymax, f->y0 - STRIP - 12);
    double unit, step;
    char buf[160];
    const char *xname = f->timed ? plot_time_unit(f->xmax, &unit) : "ops";
    if (!f->timed)
        unit = 1;
    int n = plot_ticks(f->xmax / unit, 8, &step);
    for (int i = 0; i <= n; i++) {
        double x = x_of(f, i * step * unit);
        if (x > f->x1 + 0.5)
            break;
        plot_line(c, x, f->y1, x, f->y1 + 5, PLOT_BLACK, 1, false);
        plot_tick_text(i * step, buf, sizeof buf);
        if (plot_text_fits(c, TICK, PLOT_CENTER, x, f->y1 + 19, buf))
            plot_text(c, TICK, PLOT_CENTER, x, f->y1 + 19, PLOT_BLACK, buf);
    }
    if (f->timed) { /* the model's name; its calibration sources are in the table and the JSON */
        int model = (int)strcspn(r->timed_by, ",");
        snprintf(buf, sizeof buf, "kernel time, %s (%s): %.*s", plot_run_kind(r), xname, model, r->timed_by);
    }
    else
        snprintf(buf, sizeof buf, "ops, in the order they ran (the trace has no kernel time)");
    char clipped[160];
    plot_text_clip(c, AXIS, buf, f->x1 - f->x0, clipped, sizeof clipped);
    plot_text(c, AXIS, PLOT_CENTER, (f->x0 + f->x1) / 2, f->y1 + 44, PLOT_BLACK, clipped);
}

/* Where capacity is drawn, it bounds the y axis; a capacity far above the run (a replay's unbounded
 * device) is only named in the legend. */
static bool capacity_drawn(const struct timeline_view *v, const struct job_result *r)
{
    return r->device_total && r->device_total <= 3 * (v->peak_reserved ? v->peak_reserved : 1);
}

/* Each OOM as a line; its label on a white ground, below the capacity line where that is near the top. */
static void draw_ooms(struct plot_canvas *c, const struct frame *f, const struct timeline_view *v, double capacity_y)
{
    double first = capacity_y < f->y0 + 40 ? capacity_y + 22 : f->y0 + 34;
    for (size_t i = 0; i < v->nooms; i++) {
        const struct timeline_oom *o = &v->ooms[i];
        double x = x_of(f, f->timed ? o->at_s : (double)o->op);
        plot_line(c, x, f->y0, x, f->y1, PLOT_OOM, 2.2, false);
        char size[32], label[160];
        size_format_pytorch(o->rounded, size, sizeof size);
        snprintf(label, sizeof label, "OOM: %s in %s, step %lld", size, o->phase, (long long)o->step);
        double y = first + 20 * (double)(i % 4), w = plot_text_width(c, MARK, label);
        for (int side = 0; side < 2; side++) {
            double at = side ? x + 7 : x - 7;
            enum plot_align a = side ? PLOT_LEFT : PLOT_RIGHT;
            double left = side ? at - 3 : at - w - 3;
            if (left < f->x0 || left + w + 6 > f->x1 || !plot_text_fits(c, MARK, a, at, y, label))
                continue;
            plot_fill_rect(c, left, y - 14, w + 6, 19, (struct plot_rgb){1, 1, 1}, 0.7);
            plot_text(c, MARK, a, at, y, PLOT_OOM, label);
            break;
        }
    }
}

static void draw_legend(struct plot_canvas *c, const struct frame *f, const struct timeline_view *v,
                        const struct job_result *r, unsigned used)
{
    double x = f->x1 + 24, y = f->y0;
    char buf[160], size[32];
    plot_text(c, (struct plot_font){13, true}, PLOT_LEFT, x, y + 10, PLOT_BLACK, "allocated by category");
    y += 22;
    for (int k = CAT_COUNT - 1; k >= 0; k--) /* top to bottom, as stacked */
        if (used & 1u << k)
            y = plot_legend_row(c, x, y, SWATCH_FILL, plot_category_colour((enum category)k),
                                category_name((enum category)k));
    y += 10;
    y = plot_legend_row(c, x, y, SWATCH_LINE, PLOT_BLACK, "reserved");
    size_format_pytorch(r->device_total, size, sizeof size);
    snprintf(buf, sizeof buf, "capacity %s", size);
    if (capacity_drawn(v, r))
        y = plot_legend_row(c, x, y, SWATCH_DASHED, PLOT_CAPACITY, buf);
    else
        plot_text(c, SMALL, PLOT_LEFT, x, (y += 22) - 10, PLOT_GREY, buf); /* far above the run: not drawn */
    if (v->nooms)
        y = plot_legend_row(c, x, y, SWATCH_LINE, PLOT_OOM, "OOM");
    if (v->nsteps)
        y = plot_legend_row(c, x, y, SWATCH_DASHED, PLOT_GREY, "step begins");
    y += 14;
    size_format_pytorch(v->peak_allocated, size, sizeof size);
    snprintf(buf, sizeof buf, "peak allocated %s", size);
    plot_text(c, SMALL, PLOT_LEFT, x, y, PLOT_BLACK, buf);
    size_format_pytorch(v->peak_reserved, size, sizeof size);
    snprintf(buf, sizeof buf, "peak reserved %s", size);
    plot_text(c, SMALL, PLOT_LEFT, x, y + 17, PLOT_BLACK, buf);
    if (v->npoints > 1) {
        snprintf(buf, sizeof buf, "%zu points, each the max", v->npoints);
        plot_text(c, SMALL, PLOT_LEFT, x, y + 40, PLOT_GREY, buf);
        snprintf(buf, sizeof buf, "of up to %llu ops",
                 (unsigned long long)((v->end_op + v->npoints - 1) / v->npoints));
        plot_text(c, SMALL, PLOT_LEFT, x, y + 57, PLOT_GREY, buf);
    }
}

static void draw_heading(struct plot_canvas *c, const struct timeline_view *v, const struct job_result *r)
{
    char buf[512], clipped[512], outcome[320], size[32];
    plot_run_heading(r, "memory over the run", buf, sizeof buf);
    plot_text_clip(c, TITLE, buf, WIDTH - 40, clipped, sizeof clipped);
    plot_text(c, TITLE, PLOT_LEFT, 20, 28, PLOT_BLACK, clipped);
    job_outcome(r, outcome, sizeof outcome);
    size_format_pytorch(r->device_total, size, sizeof size);
    snprintf(buf, sizeof buf, "%s (%s) · %s", r->device, size, outcome);
    plot_text_clip(c, SUBTITLE, buf, WIDTH - 40, clipped, sizeof clipped);
    plot_text(c, SUBTITLE, PLOT_LEFT, 20, 50, PLOT_GREY, clipped);
    (void)v;
}

static void draw(struct plot_canvas *c, const void *data)
{
    const struct plot_picture *p = data;
    const struct timeline_view *v = p->view;
    const struct job_result *r = p->jobs;
    struct frame f = {.x0 = LEFT, .x1 = WIDTH - RIGHT, .y0 = TOP, .y1 = HEIGHT - BOTTOM, .timed = v->end_s > 0};
    f.xmax = f.timed ? v->end_s : (double)(v->end_op ? v->end_op : 1);
    if (v->nooms) /* room right of an OOM at the very end, so its line shows */
        f.xmax *= 1.015;
    double top = (double)v->peak_reserved;
    if (capacity_drawn(v, r) && (double)r->device_total > top)
        top = (double)r->device_total;
    f.ymax = (top > 0 ? top : 1) * 1.06;
    unsigned used = categories_used(v);
    draw_heading(c, v, r);
    draw_phases(c, &f, v);
    draw_memory(c, &f, v, used);
    double capacity_y = capacity_drawn(v, r) ? y_of(&f, (double)r->device_total) : f.y1;
    if (capacity_drawn(v, r))
        plot_line(c, f.x0, capacity_y, f.x1, capacity_y, PLOT_CAPACITY, 2, true);
    draw_axes(c, &f, r);
    draw_ooms(c, &f, v, capacity_y);
    draw_steps(c, &f, v);
    draw_legend(c, &f, v, r, used);
}

struct plot_picture plot_timeline_picture(const struct timeline_view *v, const struct job_result *r)
{
    return (struct plot_picture){.width = WIDTH, .height = HEIGHT, .draw = draw, .view = v, .jobs = r, .njobs = 1};
}
