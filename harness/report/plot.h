/* plot.h: oomlab's pictures, drawn with cairo and written as SVG and PNG (plot_canvas.h):
 *  - a run's memory timeline: allocated bytes stacked by category over the run's kernel time (over its ops
 *    when it has none, as a replayed snapshot), reserved bytes as a line, the device capacity, phase
 *    bands, step ticks and each OOM (plot_timeline.c);
 *  - the allocator's segments at the reserved peak, blocks coloured allocated or free (plot_segments.c);
 *  - a scenario's variants side by side: peak allocated by category, peak reserved, the capacity and
 *    whether each fits (plot_variants.c).
 * A picture knows its size before it is drawn, and is drawn once per file. */
#ifndef OOMLAB_PLOT_H
#define OOMLAB_PLOT_H

#include "report/plot_canvas.h"
#include "run/result.h"
#include "run/timeline.h"

/* What a picture shows, its size, and how it draws itself (draw is called with the picture). */
struct plot_picture {
    double width, height;
    plot_draw_fn draw;
    const struct timeline_view *view; /* a run's pictures */
    const struct job_result *jobs;    /* the run (one), or a scenario's variants */
    size_t njobs;
    const char *name;                 /* the scenario (variants) */
};

struct plot_picture plot_timeline_picture(const struct timeline_view *v, const struct job_result *r);
struct plot_picture plot_segments_picture(const struct timeline_view *v, const struct job_result *r);
struct plot_picture plot_variants_picture(const char *scenario, const struct job_result *jobs, size_t n);
/* Draws p on a recording canvas, to inspect its labels (close c after). */
int plot_picture_draw(const struct plot_picture *p, struct plot_canvas *c, struct err *e);
/* BASE.svg and BASE.png. */
int plot_picture_write(const struct plot_picture *p, const char *base, struct err *e);

/* DIR/STEM-timeline.{svg,png} and DIR/STEM-segments.{svg,png}, DIR made if missing. */
int plot_run_write(const char *dir, const char *stem, struct timeline *t, const struct job_result *r,
                   struct err *e);
/* DIR/SCENARIO-variants.{svg,png}, DIR made if missing. */
int plot_variants_write(const char *dir, const char *scenario, const struct job_result *jobs, size_t n,
                        struct err *e);

/* Shared by the pictures of one run: "NAME / VARIANT" (or the replayed file), the device with its
 * capacity, and whether the figures are modelled or measured. */
void plot_run_heading(const struct job_result *r, const char *what, char *title, size_t tlen);
const char *plot_run_kind(const struct job_result *r); /* "modelled" or "measured" */

#endif
