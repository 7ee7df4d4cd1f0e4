/* plot_variants.c: a scenario's variants side by side (see plot.h): per variant a bar of the allocated
 * bytes per category at its allocated peak, an outline up to its reserved peak, and whether it fits or
 * where it OOMs; the device capacity as a dashed line across. */
#include <stdio.h>
#include <string.h>

#include "report/plot.h"
#include "util/size.h"

#define LEFT 78
#define RIGHT 236
#define SLOT 176
#define MIN_PLOT 560
#define HEIGHT 640
#define TOP 84
#define BOTTOM 104
#define HEADROOM 64 /* pixels above the tallest outline for its three labels */

static const struct plot_font TITLE = {18, true}, SUBTITLE = {13, false}, SMALL = {11.5, false},
                              NAME = {13, true}, VALUE = {12, false}, OUTCOME = {12.5, true};

struct frame {
    double x0, x1, y0, y1, ymax;
};

static double y_of(const struct frame *f, double bytes)
{
    return f->y1 - (f->y1 - f->y0) * bytes / f->ymax;
}

static unsigned categories_used(const struct job_result *jobs, size_t n)
{
    unsigned used = 0;
    for (size_t j = 0; j < n; j++)
        for (int k = 0; k < CAT_COUNT; k++)
            if (jobs[j].run.category_at_peak[k])
                used |= 1u << k;
    return used;
}

/* capacity_y: where the capacity line crosses (f->y1 without one); the labels stay above it when the
 * bar's top is close below it. */
static void draw_bar(struct plot_canvas *c, const struct frame *f, const struct job_result *r, double cx,
                     double capacity_y)
{
    double bw = SLOT * 0.36, sum = 0;
    for (int k = 0; k < CAT_COUNT; k++) {
        uint64_t b = r->run.category_at_peak[k];
        if (!b)
            continue;
        double top = y_of(f, sum + (double)b), bottom = y_of(f, sum);
        plot_fill_rect(c, cx - bw / 2, top, bw, bottom - top, plot_category_colour((enum category)k), 1);
        sum += (double)b;
    }
    double ow = bw + 18, top = y_of(f, (double)r->run.peak_reserved);
    plot_set_colour(c, PLOT_BLACK, 1);
    cairo_set_line_width(c->cr, 1.6);
    cairo_rectangle(c->cr, cx - ow / 2, top, ow, f->y1 - top);
    cairo_stroke(c->cr);
    uint64_t high = r->run.peak_reserved > r->run.peak_allocated ? r->run.peak_reserved : r->run.peak_allocated;
    double y = y_of(f, (double)high) - 8;
    if (y - 48 < capacity_y + 4 && y > capacity_y - 8)
        y = capacity_y - 8;
    char size[32], buf[96];
    size_format_pytorch(r->run.peak_allocated, size, sizeof size);
    snprintf(buf, sizeof buf, "alloc %s", size);
    plot_text(c, VALUE, PLOT_CENTER, cx, y, PLOT_BLACK, buf);
    size_format_pytorch(r->run.peak_reserved, size, sizeof size);
    snprintf(buf, sizeof buf, "resv %s", size);
    plot_text(c, VALUE, PLOT_CENTER, cx, y - 16, PLOT_BLACK, buf);
    if (r->run.oom.happened)
        snprintf(buf, sizeof buf, "OOM in %s", r->run.oom.phase);
    else
        snprintf(buf, sizeof buf, "fits");
    char clipped[96];
    plot_text_clip(c, OUTCOME, buf, SLOT - 8, clipped, sizeof clipped);
    plot_text(c, OUTCOME, PLOT_CENTER, cx, y - 34, r->run.oom.happened ? PLOT_OOM : PLOT_FITS, clipped);
}

/* The variant's name and its fixes, one per line (at most three lines), under its bar. */
static void draw_name(struct plot_canvas *c, const struct frame *f, const struct job_result *r, double cx)
{
    char clipped[128];
    plot_text_clip(c, NAME, r->name, SLOT - 8, clipped, sizeof clipped);
    plot_text(c, NAME, PLOT_CENTER, cx, f->y1 + 22, PLOT_BLACK, clipped);
    char fixes[256];
    snprintf(fixes, sizeof fixes, "%s", strcmp(r->fixes, "-") ? r->fixes : "no fixes");
    int line = 0;
    for (char *save = NULL, *fix = strtok_r(fixes, ",", &save); fix; fix = strtok_r(NULL, ",", &save), line++) {
        char more[64];
        if (line == 2 && save && *save) { /* a fourth would not fit: say how many are left */
            int left = 1;
            for (const char *p = save; *p; p++)
                left += *p == ',';
            snprintf(more, sizeof more, "%s + %d more", fix, left);
            fix = more;
        }
        plot_text_clip(c, SMALL, fix, SLOT - 8, clipped, sizeof clipped);
        plot_text(c, SMALL, PLOT_CENTER, cx, f->y1 + 40 + 15 * line, PLOT_GREY, clipped);
        if (line == 2)
            break;
    }
}

/* The capacity's line across, labelled where the label stays clear of the bars' labels. */
static void draw_capacity(struct plot_canvas *c, const struct frame *f, uint64_t capacity)
{
    double y = y_of(f, (double)capacity);
    plot_line(c, f->x0, y, f->x1, y, PLOT_CAPACITY, 2, true);
    char size[32], buf[64];
    size_format_pytorch(capacity, size, sizeof size);
    snprintf(buf, sizeof buf, "capacity %s", size);
    const double xs[] = {f->x1 - 6, f->x0 + 6}, dy[] = {-6, 16};
    for (int k = 0; k < 4; k++) {
        enum plot_align a = k % 2 ? PLOT_LEFT : PLOT_RIGHT;
        if (plot_text_fits(c, SMALL, a, xs[k % 2], y + dy[k / 2], buf)) {
            plot_text(c, SMALL, a, xs[k % 2], y + dy[k / 2], PLOT_CAPACITY, buf);
            return;
        }
    }
}

static void draw_legend(struct plot_canvas *c, const struct frame *f, unsigned used, uint64_t capacity)
{
    double x = f->x1 + 24, y = f->y0;
    plot_text(c, (struct plot_font){13, true}, PLOT_LEFT, x, y + 10, PLOT_BLACK, "at the allocated peak");
    y += 22;
    for (int k = CAT_COUNT - 1; k >= 0; k--)
        if (used & 1u << k)
            y = plot_legend_row(c, x, y, SWATCH_FILL, plot_category_colour((enum category)k),
                                category_name((enum category)k));
    y += 10;
    y = plot_legend_row(c, x, y, SWATCH_OUTLINE, PLOT_BLACK, "peak reserved");
    if (capacity)
        plot_legend_row(c, x, y, SWATCH_DASHED, PLOT_CAPACITY, "capacity");
}

static void draw(struct plot_canvas *c, const void *data)
{
    const struct plot_picture *p = data;
    const struct job_result *jobs = p->jobs;
    size_t n = p->njobs;
    double width = c->width;
    struct frame f = {.x0 = LEFT, .x1 = width - RIGHT, .y0 = TOP, .y1 = HEIGHT - BOTTOM};
    uint64_t capacity = n ? jobs[0].device_total : 0, top = capacity;
    for (size_t j = 0; j < n; j++) {
        if (jobs[j].run.peak_reserved > top)
            top = jobs[j].run.peak_reserved;
        if (jobs[j].run.peak_allocated > top)
            top = jobs[j].run.peak_allocated;
    }
    /* the tallest outline leaves HEADROOM pixels for its labels */
    f.ymax = (double)(top ? top : 1) * (f.y1 - f.y0) / (f.y1 - f.y0 - HEADROOM);
    char buf[512], clipped[512], size[32];
    snprintf(buf, sizeof buf, "%s: peak memory per variant (%s)", p->name, n ? plot_run_kind(&jobs[0]) : "modelled");
    plot_text_clip(c, TITLE, buf, width - 40, clipped, sizeof clipped);
    plot_text(c, TITLE, PLOT_LEFT, 20, 28, PLOT_BLACK, clipped);
    size_format_pytorch(capacity, size, sizeof size);
    snprintf(buf, sizeof buf, "%s (%s) · bars: allocated by category at its peak · outlines: peak reserved",
             n ? jobs[0].device : "-", size);
    plot_text_clip(c, SUBTITLE, buf, width - 40, clipped, sizeof clipped);
    plot_text(c, SUBTITLE, PLOT_LEFT, 20, 50, PLOT_GREY, clipped);
    plot_byte_axis(c, f.x0, f.x1, f.y0, f.y1, f.ymax, f.y0 - 14);
    for (size_t j = 0; j < n; j++) {
        double cx = f.x0 + (f.x1 - f.x0) * ((double)j + 0.5) / (double)n;
        draw_bar(c, &f, &jobs[j], cx, capacity ? y_of(&f, (double)capacity) : f.y1);
        draw_name(c, &f, &jobs[j], cx);
    }
    if (capacity)
        draw_capacity(c, &f, capacity);
    draw_legend(c, &f, categories_used(jobs, n), capacity);
}

struct plot_picture plot_variants_picture(const char *scenario, const struct job_result *jobs, size_t n)
{
    double plot = n * SLOT > MIN_PLOT ? (double)n * SLOT : MIN_PLOT;
    return (struct plot_picture){.width = LEFT + plot + RIGHT, .height = HEIGHT, .draw = draw, .jobs = jobs,
                                 .njobs = n, .name = scenario};
}
