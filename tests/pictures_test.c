/* pictures_test.c: the pictures of report/plot.h for the small text trace of timeline_run.h and two
 * variants made from it: each draws the labels a reader needs (title, legend, the OOM with what it asked
 * for, the capacity, phases and step, the peaks), no two labels overlap, and the files written are a
 * well-formed SVG (parsed with expat) whose glyphs are exactly the labels' characters (cairo draws each
 * character as one <use> of a glyph) and a PNG of the canvas's size. A picture into a directory that
 * cannot exist fails with ERR_INPUT and leaves nothing. */
#include <expat.h>
#include <string.h>
#include <unistd.h>

#include "report/plot.h"
#include "tap.h"
#include "timeline_run.h"

static bool has_label(const struct plot_canvas *c, const char *text)
{
    for (size_t i = 0; i < c->nlabels; i++)
        if (!strcmp(c->labels[i].text, text))
            return true;
    return false;
}

static void expect_labels(const char *what, const struct plot_canvas *c, const char *const *labels)
{
    for (; *labels; labels++)
        if (!ok(has_label(c, *labels), "%s: label '%s'", what, *labels))
            for (size_t i = 0; i < c->nlabels; i++)
                diag("  drawn: '%s'", c->labels[i].text);
    is_int(plot_canvas_overlaps(c), 0, "%s: no two of its %zu labels overlap", what, c->nlabels);
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += (*s & 0xC0) != 0x80;
    return n;
}

struct svg_check {
    int depth, elements;
    char root[16], view_box[64];
    size_t glyph_uses;
};

static void on_start(void *user, const XML_Char *name, const XML_Char **attrs)
{
    struct svg_check *s = user;
    if (s->depth++ == 0)
        snprintf(s->root, sizeof s->root, "%s", name);
    s->elements++;
    for (int i = 0; attrs[i]; i += 2) {
        if (s->depth == 1 && !strcmp(attrs[i], "viewBox"))
            snprintf(s->view_box, sizeof s->view_box, "%s", attrs[i + 1]);
        if (!strcmp(name, "use") && !strcmp(attrs[i], "xlink:href") && !strncmp(attrs[i + 1], "#glyph", 6))
            s->glyph_uses++;
    }
}

static void on_end(void *user, const XML_Char *name)
{
    ((struct svg_check *)user)->depth--;
}

/* Parses path with expat; false (with a diagnostic) if it is not well-formed XML. */
static bool parse_svg(const char *path, struct svg_check *s)
{
    *s = (struct svg_check){0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    XML_Parser p = XML_ParserCreate(NULL);
    XML_SetUserData(p, s);
    XML_SetElementHandler(p, on_start, on_end);
    char buf[65536];
    bool good = true;
    for (;;) {
        size_t n = fread(buf, 1, sizeof buf, f);
        if (XML_Parse(p, buf, (int)n, n == 0) == XML_STATUS_ERROR) {
            diag("%s:%lu: %s", path, (unsigned long)XML_GetCurrentLineNumber(p), XML_ErrorString(XML_GetErrorCode(p)));
            good = false;
            break;
        }
        if (n == 0)
            break;
    }
    XML_ParserFree(p);
    fclose(f);
    return good;
}

/* The PNG signature and the IHDR's width and height. */
static bool png_size(const char *path, unsigned *w, unsigned *h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char b[24];
    FILE *f = fopen(path, "rb");
    bool good = f && fread(b, 1, sizeof b, f) == sizeof b && !memcmp(b, sig, 8) && !memcmp(b + 12, "IHDR", 4);
    if (f)
        fclose(f);
    *w = good ? (unsigned)b[16] << 24 | (unsigned)b[17] << 16 | (unsigned)b[18] << 8 | b[19] : 0;
    *h = good ? (unsigned)b[20] << 24 | (unsigned)b[21] << 16 | (unsigned)b[22] << 8 | b[23] : 0;
    return good;
}

/* Writes the picture to DIR/NAME.{svg,png} and checks both files against its drawing on c. */
static void check_files(const char *what, const struct plot_picture *p, const struct plot_canvas *c, const char *dir,
                        const char *name)
{
    char base[512], svg[520], png[520];
    snprintf(base, sizeof base, "%s/%s", dir, name);
    snprintf(svg, sizeof svg, "%s.svg", base);
    snprintf(png, sizeof png, "%s.png", base);
    struct err e = {0};
    ok(plot_picture_write(p, base, &e) == 0, "%s: written (%s)", what, e.msg);
    struct svg_check s;
    ok(parse_svg(svg, &s) && s.depth == 0 && !strcmp(s.root, "svg"), "%s: the SVG is well-formed, its root <svg>",
       what);
    char box[64];
    snprintf(box, sizeof box, "0 0 %g %g", c->width, c->height);
    is_str(s.view_box, box, "%s: the SVG's viewBox is the canvas", what);
    size_t chars = 0;
    for (size_t i = 0; i < c->nlabels; i++)
        chars += utf8_chars(c->labels[i].text);
    is_u64(s.glyph_uses, chars, "%s: the SVG draws one glyph per character of its labels", what);
    unsigned w, h;
    ok(png_size(png, &w, &h), "%s: the PNG has the PNG signature", what);
    ok(w == (unsigned)c->width && h == (unsigned)c->height, "%s: the PNG is %gx%g (got %ux%u)", what, c->width,
       c->height, w, h);
}

static void timeline_picture(const struct timeline_view *v, const struct job_result *r, const char *dir)
{
    struct plot_picture p = plot_timeline_picture(v, r);
    struct plot_canvas c;
    struct err e = {0};
    ok(plot_picture_draw(&p, &c, &e) == 0, "timeline drawn (%s)", e.msg);
    static const char *const labels[] = {
        "tiny / before: memory over the run (modelled)", "sim:64MiB (64.00 MiB) · OOM in backward, step 1 (model.head)",
        "load", "forward", "backward", "step 1", "OOM: 48.00 MiB in backward, step 1", "MiB",
        "ops, in the order they ran (the trace has no kernel time)", "param", "activation", "temp", "reserved",
        "capacity 64.00 MiB", "OOM", "peak allocated 28.00 MiB", "peak reserved 36.00 MiB", NULL};
    expect_labels("timeline", &c, labels);
    ok(!has_label(&c, "grad"), "timeline: the legend names only the categories that held memory");
    check_files("timeline", &p, &c, dir, "tiny-timeline");
    plot_canvas_close(&c);
}

static void segments_picture(const struct timeline_view *v, const struct job_result *r, const char *dir)
{
    struct plot_picture p = plot_segments_picture(v, r);
    struct plot_canvas c;
    struct err e = {0};
    ok(plot_picture_draw(&p, &c, &e) == 0, "segments drawn (%s)", e.msg);
    static const char *const labels[] = {
        "tiny / before: segments at the reserved peak (modelled)",
        "after op 5 (forward, step 1): reserved 36.00 MiB in 2 segments (2 large, 0 small), allocated 24.00 MiB, "
        "free 12.00 MiB, the largest free block 12.00 MiB",
        "free 12.00 MiB", "0 MiB", "32 MiB", "allocated", "free (cached in the segment)", NULL};
    expect_labels("segments", &c, labels);
    /* 36 MiB in rows of 4 MiB (the smallest power of two that fits it in 14 rows): 9 rows of 36 px */
    ok(c.height == 100 + 9 * 36 + 56, "segments: 9 rows of 4 MiB (height %g)", c.height);
    check_files("segments", &p, &c, dir, "tiny-segments");
    plot_canvas_close(&c);
}

static void variants_picture(const struct job_result *before, const char *dir)
{
    struct job_result jobs[2] = {*before, *before};
    struct job_result *after = &jobs[1];
    snprintf(after->name, sizeof after->name, "after");
    snprintf(after->fixes, sizeof after->fixes, "one,two,three,four,five");
    after->run.oom.happened = false;
    after->run.peak_allocated = 12 * MiB;
    after->run.peak_reserved = 20 * MiB;
    memset(after->run.category_at_peak, 0, sizeof after->run.category_at_peak);
    after->run.category_at_peak[CAT_PARAM] = 8 * MiB;
    after->run.category_at_peak[CAT_ACTIVATION] = 4 * MiB;
    struct plot_picture p = plot_variants_picture("tiny", jobs, 2);
    struct plot_canvas c;
    struct err e = {0};
    ok(plot_picture_draw(&p, &c, &e) == 0, "variants drawn (%s)", e.msg);
    static const char *const labels[] = {"tiny: peak memory per variant (modelled)", "before", "no fixes", "after",
                                         "one", "two", "three + 2 more", "OOM in backward", "fits",
                                         "alloc 28.00 MiB", "resv 36.00 MiB", "alloc 12.00 MiB", "resv 20.00 MiB",
                                         "capacity 64.00 MiB", "peak reserved", "capacity", NULL};
    expect_labels("variants", &c, labels);
    check_files("variants", &p, &c, dir, "tiny-variants");
    plot_canvas_close(&c);
}

/* A picture whose directory cannot be made: ERR_INPUT naming it, no file anywhere. */
static void bad_directory(struct timeline *tl, const struct job_result *r, const char *dir)
{
    char file[512], under[600];
    snprintf(file, sizeof file, "%s/a-file", dir);
    FILE *f = fopen(file, "w");
    if (f)
        fclose(f);
    snprintf(under, sizeof under, "%s/pictures", file);
    struct err e = {0};
    ok(plot_run_write(under, "tiny", tl, r, &e) == -1 && e.code == ERR_INPUT && strstr(e.msg, "--plot: ") &&
           strstr(e.msg, under),
       "--plot under a regular file: ERR_INPUT naming it (%s)", e.msg);
    snprintf(under, sizeof under, "%s/missing/pictures", dir);
    e = (struct err){0};
    ok(plot_run_write(under, "tiny", tl, r, &e) == -1 && e.code == ERR_INPUT, "--plot two levels down: ERR_INPUT (%s)",
       e.msg);
    ok(access(under, F_OK) != 0, "and nothing was made");
}

int main(void)
{
    char dir[] = "/tmp/oomlab-pictures-XXXXXX";
    if (!mkdtemp(dir))
        tap_skip_all("cannot make a temporary directory");
    struct timeline *tl;
    struct job_result r;
    ok(tiny_run(&tl, &r) == 0, "the small text trace runs");
    const struct timeline_view *v = timeline_view(tl, &(struct err){0});
    timeline_picture(v, &r, dir);
    segments_picture(v, &r, dir);
    variants_picture(&r, dir);
    bad_directory(tl, &r, dir);
    timeline_destroy(tl);
    remove_tmp_dir(dir);
    return done_testing();
}
