/* plot_write.c: a run's pictures and a scenario's into a directory (see plot.h), and the heading they
 * share. */
#include <stdio.h>
#include <string.h>

#include "report/plot.h"
#include "util/dir.h"

const char *plot_run_kind(const struct job_result *r)
{
    return r->run.measured ? "measured" : "modelled";
}

void plot_run_heading(const struct job_result *r, const char *what, char *title, size_t tlen)
{
    if (r->has_expect) { /* a scenario's variant */
        snprintf(title, tlen, "%s / %s: %s (%s)", r->group, r->name, what, plot_run_kind(r));
    } else {
        const char *slash = strrchr(r->group, '/');
        snprintf(title, tlen, "%s: %s (replayed, %s)", slash ? slash + 1 : r->group, what, plot_run_kind(r));
    }
}

int plot_picture_draw(const struct plot_picture *p, struct plot_canvas *c, struct err *e)
{
    return plot_canvas_draw(c, p->width, p->height, p->draw, p, e);
}

int plot_picture_write(const struct plot_picture *p, const char *base, struct err *e)
{
    return plot_canvas_write(p->width, p->height, p->draw, p, base, e);
}

/* DIR/NAME-SUFFIX, the base of a picture's files; DIR made if missing. */
static int picture_base(const char *dir, const char *name, const char *suffix, char *base, size_t len, struct err *e)
{
    if (dir_make(dir, e))
        return err_prefix(e, "--plot: ");
    if (snprintf(base, len, "%s/%s-%s", dir, name, suffix) >= (int)len - 8)
        return err_set(e, ERR_INPUT, "--plot %s: path too long", dir);
    return 0;
}

int plot_run_write(const char *dir, const char *stem, struct timeline *t, const struct job_result *r,
                   struct err *e)
{
    const struct timeline_view *v = timeline_view(t, e);
    char base[4096];
    if (!v)
        return -1;
    struct plot_picture timeline = plot_timeline_picture(v, r), segments = plot_segments_picture(v, r);
    if (picture_base(dir, stem, "timeline", base, sizeof base, e) || plot_picture_write(&timeline, base, e) ||
        picture_base(dir, stem, "segments", base, sizeof base, e) || plot_picture_write(&segments, base, e))
        return -1;
    return 0;
}

int plot_variants_write(const char *dir, const char *scenario, const struct job_result *jobs, size_t n,
                        struct err *e)
{
    char base[4096];
    struct plot_picture variants = plot_variants_picture(scenario, jobs, n);
    if (picture_base(dir, scenario, "variants", base, sizeof base, e) || plot_picture_write(&variants, base, e))
        return -1;
    return 0;
}
