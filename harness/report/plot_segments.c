/* plot_segments.c: the allocator's segments when reserved last reached its peak (see plot.h), as one
 * strip in address order wrapped into rows of a round number of bytes: each block sized by its bytes and
 * coloured allocated or free (cached), segments separated by white gaps, the larger free blocks labelled.
 * It is the moment the table's reserved-but-unallocated figure describes. */
#include <stdio.h>
#include <string.h>

#include "report/plot.h"
#include "util/size.h"

#define WIDTH 1200
#define LEFT 96
#define RIGHT 24
#define TOP 100
#define ROW 26
#define GAP 10
#define MAX_ROWS 14

static const struct plot_font TITLE = {18, true}, SUBTITLE = {13, false}, SMALL = {11.5, false},
                              LABEL = {11.5, true};

static const struct plot_rgb ALLOCATED = {0.000, 0.447, 0.698}, FREE = {0.902, 0.624, 0.000},
                             PENDING = {0.600, 0.600, 0.600}, WHITE = {1, 1, 1};

struct strip {
    double x0, width;   /* of a row */
    uint64_t per_row;   /* bytes */
};

/* Fills [at, at + size) of the strip, wrapping across rows. */
static void fill_run(struct plot_canvas *c, const struct strip *s, uint64_t at, uint64_t size, struct plot_rgb colour)
{
    while (size) {
        uint64_t row = at / s->per_row, in = at % s->per_row, n = s->per_row - in < size ? s->per_row - in : size;
        double x = s->x0 + s->width * (double)in / (double)s->per_row, w = s->width * (double)n / (double)s->per_row;
        plot_fill_rect(c, x, TOP + (double)row * (ROW + GAP), w, ROW, colour, 1);
        at += n;
        size -= n;
    }
}

/* The first row piece of [at, at + size): its x and width. */
static double first_piece(const struct strip *s, uint64_t at, uint64_t size, double *w)
{
    uint64_t in = at % s->per_row, n = s->per_row - in < size ? s->per_row - in : size;
    *w = s->width * (double)n / (double)s->per_row;
    return s->x0 + s->width * (double)in / (double)s->per_row;
}

/* A white gap where a segment begins: 2 px, 1 px for a segment of a few pixels, none for one narrower
 * (a gap would wash its colour out). */
static void segment_gap(struct plot_canvas *c, const struct strip *s, uint64_t at, uint64_t size)
{
    double px = s->width * (double)size / (double)s->per_row, gap = px >= 8 ? 2 : px >= 4 ? 1 : 0;
    if (gap == 0)
        return;
    double x = s->x0 + s->width * (double)(at % s->per_row) / (double)s->per_row;
    plot_fill_rect(c, x, TOP + (double)(at / s->per_row) * (ROW + GAP), gap, ROW, WHITE, 1);
}

static void label_free_blocks(struct plot_canvas *c, const struct strip *s, const struct alloc_snapshot *snap)
{
    uint64_t at = 0;
    for (size_t i = 0; i < snap->nsegments; i++) {
        const struct segment_info *g = &snap->segments[i];
        for (size_t k = 0; k < g->nblocks; k++) {
            const struct block_info *b = &g->blocks[k];
            double w, x = first_piece(s, at, b->size, &w);
            double y = TOP + (double)(at / s->per_row) * (ROW + GAP) + ROW / 2.0 + 4;
            at += b->size;
            if (b->state != BLOCK_INACTIVE)
                continue;
            char size[32], label[48];
            size_format_pytorch(b->size, size, sizeof size);
            snprintf(label, sizeof label, "free %s", size);
            if (plot_text_width(c, LABEL, label) + 10 < w && plot_text_fits(c, LABEL, PLOT_CENTER, x + w / 2, y, label))
                plot_text(c, LABEL, PLOT_CENTER, x + w / 2, y, (struct plot_rgb){0.15, 0.1, 0}, label);
        }
    }
}

static void draw_strip(struct plot_canvas *c, const struct strip *s, const struct alloc_snapshot *snap)
{
    uint64_t at = 0;
    cairo_save(c->cr);
    cairo_set_antialias(c->cr, CAIRO_ANTIALIAS_NONE); /* crisp edges: many 1-pixel segments stay solid */
    for (size_t i = 0; i < snap->nsegments; i++) {
        const struct segment_info *g = &snap->segments[i];
        uint64_t start = at;
        for (size_t k = 0; k < g->nblocks;) { /* neighbours in one state as one run: no seams between them */
            enum block_state state = g->blocks[k].state;
            uint64_t size = 0;
            for (; k < g->nblocks && g->blocks[k].state == state; k++)
                size += g->blocks[k].size;
            fill_run(c, s, at, size, state == BLOCK_ACTIVE_ALLOCATED ? ALLOCATED : state == BLOCK_INACTIVE ? FREE : PENDING);
            at += size;
        }
        segment_gap(c, s, start, g->total_size);
        at = start + g->total_size;
    }
    cairo_restore(c->cr);
}

static void row_labels(struct plot_canvas *c, const struct strip *s, size_t rows)
{
    double unit;
    const char *name = plot_byte_unit(s->per_row * rows, &unit);
    for (size_t r = 0; r < rows; r++) {
        char num[32], label[48];
        plot_tick_text((double)(s->per_row * r) / unit, num, sizeof num);
        snprintf(label, sizeof label, "%s %s", num, name);
        plot_text(c, SMALL, PLOT_RIGHT, s->x0 - 10, TOP + (double)r * (ROW + GAP) + ROW / 2.0 + 4, PLOT_GREY, label);
    }
}

static void heading(struct plot_canvas *c, const struct timeline_segments *seg, const struct job_result *r)
{
    char buf[512], clipped[512], res[32], alloc[32], freeb[32], largest[32];
    plot_run_heading(r, "segments at the reserved peak", buf, sizeof buf);
    plot_text_clip(c, TITLE, buf, WIDTH - 40, clipped, sizeof clipped);
    plot_text(c, TITLE, PLOT_LEFT, 20, 28, PLOT_BLACK, clipped);
    size_t large = 0;
    uint64_t biggest = 0;
    for (size_t i = 0; i < seg->snap.nsegments; i++) {
        large += !seg->snap.segments[i].small;
        for (size_t k = 0; k < seg->snap.segments[i].nblocks; k++) {
            const struct block_info *b = &seg->snap.segments[i].blocks[k];
            if (b->state == BLOCK_INACTIVE && b->size > biggest)
                biggest = b->size;
        }
    }
    size_format_pytorch(seg->reserved, res, sizeof res);
    size_format_pytorch(seg->allocated, alloc, sizeof alloc);
    size_format_pytorch(seg->reserved - seg->allocated, freeb, sizeof freeb);
    size_format_pytorch(biggest, largest, sizeof largest);
    char when[160];
    if (!seg->op)
        snprintf(when, sizeof when, "at the start");
    else if (seg->step)
        snprintf(when, sizeof when, "after op %llu (%s, step %lld)", (unsigned long long)seg->op, seg->phase,
                 (long long)seg->step);
    else if (strcmp(seg->phase, "start")) /* "start": the run names no phase */
        snprintf(when, sizeof when, "after op %llu (%s)", (unsigned long long)seg->op, seg->phase);
    else
        snprintf(when, sizeof when, "after op %llu", (unsigned long long)seg->op);
    snprintf(buf, sizeof buf, "%s: reserved %s in %zu segment%s (%zu large, %zu small), allocated %s, free %s, "
             "the largest free block %s",
             when, res, seg->snap.nsegments, seg->snap.nsegments == 1 ? "" : "s", large, seg->snap.nsegments - large,
             alloc, freeb, largest);
    plot_text_clip(c, SUBTITLE, buf, WIDTH - 40, clipped, sizeof clipped);
    plot_text(c, SUBTITLE, PLOT_LEFT, 20, 50, PLOT_GREY, clipped);
}

/* Bytes per row: the smallest power of two that fits the reserved bytes in MAX_ROWS rows. */
static uint64_t bytes_per_row(uint64_t reserved)
{
    uint64_t n = 512;
    while (n * MAX_ROWS < reserved)
        n *= 2;
    return n;
}

static void legend(struct plot_canvas *c, double y, const struct strip *s)
{
    double x = LEFT;
    char size[32], buf[160];
    plot_legend_row(c, x, y, SWATCH_FILL, ALLOCATED, "allocated");
    plot_legend_row(c, x + 130, y, SWATCH_FILL, FREE, "free (cached in the segment)");
    double unit;
    const char *name = plot_byte_unit(2 * s->per_row, &unit); /* the largest unit the row holds whole */
    plot_tick_text((double)s->per_row / unit, size, sizeof size);
    snprintf(buf, sizeof buf, "segments in address order, each after a white gap; a row is %s %s", size, name);
    plot_text(c, SMALL, PLOT_LEFT, x + 400, y + 12, PLOT_GREY, buf);
}

/* The reserved bytes drawn (0: none), the strip they are drawn in and its rows. */
static uint64_t layout(const struct timeline_view *v, struct strip *s, size_t *rows)
{
    const struct timeline_segments *seg = v->segments;
    uint64_t reserved = seg && seg->captured ? seg->reserved : 0;
    *s = (struct strip){LEFT, WIDTH - LEFT - RIGHT, bytes_per_row(reserved)};
    *rows = reserved ? (size_t)((reserved + s->per_row - 1) / s->per_row) : 1;
    return reserved;
}

static void draw(struct plot_canvas *c, const void *data)
{
    const struct plot_picture *p = data;
    const struct timeline_segments *seg = p->view->segments;
    struct strip s;
    size_t rows;
    if (!layout(p->view, &s, &rows)) {
        char buf[512];
        plot_run_heading(p->jobs, "segments at the reserved peak", buf, sizeof buf);
        plot_text(c, TITLE, PLOT_LEFT, 20, 28, PLOT_BLACK, buf);
        plot_text(c, SUBTITLE, PLOT_LEFT, 20, 50, PLOT_GREY, "the run reserved no memory");
        return;
    }
    heading(c, seg, p->jobs);
    draw_strip(c, &s, &seg->snap);
    row_labels(c, &s, rows);
    label_free_blocks(c, &s, &seg->snap);
    legend(c, TOP + (double)rows * (ROW + GAP) + 14, &s);
}

struct plot_picture plot_segments_picture(const struct timeline_view *v, const struct job_result *r)
{
    struct strip s;
    size_t rows;
    layout(v, &s, &rows);
    return (struct plot_picture){.width = WIDTH, .height = TOP + (double)rows * (ROW + GAP) + 56, .draw = draw,
                                 .view = v, .jobs = r, .njobs = 1};
}
