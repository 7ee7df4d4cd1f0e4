/* snapshot_stream_test.c: the streamed snapshot reading (snapshot_parse_streamed) held to the whole-tree one
 * (snapshot_parse_whole): every shared snapshot is taken streamed and read the same, field by field; pickles
 * that leave the shape CPython's pickler writes (an event reached again through the memo, device_traces set
 * twice, a device's events extended after the next device's began, the list in two places) are left to the whole reading, which
 * snapshot_parse then gives; a file the streamed reading takes but the whole one refuses is not possible. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/snapshot_same.h"
#include "replay/snapshot_file.h"
#include "tap.h"

/* ---- a pickle written opcode by opcode (protocol 2 with BINPUT/BINGET) ---- */

struct bytes {
    unsigned char b[4096];
    size_t n;
};

static void op(struct bytes *p, const char *ops, size_t n)
{
    memcpy(p->b + p->n, ops, n);
    p->n += n;
}
#define OPS(p, lit) op(p, lit, sizeof lit - 1)

static void str(struct bytes *p, const char *s)
{
    size_t n = strlen(s);
    p->b[p->n++] = 'X'; /* BINUNICODE */
    for (int i = 0; i < 4; i++)
        p->b[p->n++] = (unsigned char)(n >> (8 * i));
    op(p, s, n);
}

/* An event dict's pairs (after its EMPTY_DICT, and a BINPUT when memo >= 0), closed by SETITEMS. */
static void event(struct bytes *p, const char *action, unsigned addr, int memo)
{
    OPS(p, "}");
    if (memo >= 0) {
        OPS(p, "q");
        p->b[p->n++] = (unsigned char)memo;
    }
    OPS(p, "(");
    str(p, "action");
    str(p, action);
    str(p, "addr");
    OPS(p, "J"); /* BININT */
    for (int i = 0; i < 4; i++)
        p->b[p->n++] = (unsigned char)(addr >> (8 * i));
    str(p, "size");
    OPS(p, "K\x40");
    str(p, "stream");
    OPS(p, "K\x00");
    str(p, "frames");
    OPS(p, "](");
    OPS(p, "}(");
    str(p, "filename");
    str(p, "train.py");
    str(p, "line");
    OPS(p, "K\x07");
    str(p, "name");
    str(p, "step");
    OPS(p, "ue"); /* SETITEMS of the frame, APPENDS of the frames */
    OPS(p, "u");  /* SETITEMS of the event */
}

/* {'segments': [], 'device_traces': ...} up to the traces' value, which the caller writes. */
static void head(struct bytes *p)
{
    p->n = 0;
    OPS(p, "\x80\x02}(");
    str(p, "segments");
    OPS(p, "]");
    str(p, "device_traces");
}

/* Reads p both ways: whether the streamed reading took it, and that snapshot_parse gives what the whole
 * reading gives (nevents of them, when it takes it). */
static bool read_both(const char *what, const struct bytes *p, size_t nevents)
{
    struct snapshot s, w, all;
    struct err e = {0}, we = {0};
    bool streamed = snapshot_parse_streamed("t.pickle", p->b, p->n, &s) == 0;
    int wrc = snapshot_parse_whole("t.pickle", p->b, p->n, &w, &we);
    int rc = snapshot_parse("t.pickle", p->b, p->n, &all, &e);
    size_t at;
    const char *differs = rc || wrc ? "an error" : snapshot_difference(&all, &w, &at);
    ok(wrc == 0 && !differs && w.nevents == nevents, "%s: snapshot_parse gives the whole reading's %zu events (%s)",
       what, nevents, differs ? differs : we.msg);
    if (streamed) {
        differs = wrc ? "the whole reading fails" : snapshot_difference(&s, &w, &at);
        ok(!differs, "%s: the streamed reading agrees%s%s", what, differs ? ": not on " : "", differs ? differs : "");
        snapshot_free(&s);
    }
    if (wrc == 0)
        snapshot_free(&w);
    if (rc == 0)
        snapshot_free(&all);
    return streamed;
}

static void test_shapes(void)
{
    struct bytes p;
    head(&p);
    OPS(&p, "]q\x01(]q\x02(");
    event(&p, "alloc", 4096, 3);
    event(&p, "free_completed", 4096, 4);
    OPS(&p, "e]q\x05(");
    event(&p, "alloc", 8192, 6);
    OPS(&p, "eeu.");
    ok(read_both("two devices, events memoized", &p, 3), "  taken by the streamed reading");

    head(&p);
    OPS(&p, "]q\x01]q\x02");
    event(&p, "alloc", 4096, -1);
    OPS(&p, "aau."); /* one device, one event: APPEND, APPEND */
    ok(read_both("one device, one event, APPEND", &p, 1), "  taken by the streamed reading");

    head(&p);
    OPS(&p, "]q\x01(]q\x02(");
    event(&p, "alloc", 4096, 3);
    OPS(&p, "h\x03"); /* the same event again, through the memo */
    OPS(&p, "eeu.");
    ok(!read_both("an event reached twice through the memo", &p, 2), "  left to the whole reading");

    head(&p);
    OPS(&p, "]q\x01(]q\x02(");
    event(&p, "alloc", 4096, 3);
    OPS(&p, "ee");
    str(&p, "device_traces"); /* set again: Python keeps the later, empty one */
    OPS(&p, "]u.");
    ok(!read_both("device_traces set twice", &p, 0), "  left to the whole reading");

    head(&p);
    OPS(&p, "]q\x01(]q\x02(");
    event(&p, "alloc", 4096, 3);
    OPS(&p, "e]q\x04(");
    event(&p, "alloc", 8192, 5);
    OPS(&p, "eh\x02(");       /* device 0's list again, extended after device 1's, and a third item */
    event(&p, "free_completed", 4096, 6);
    OPS(&p, "eeu.");
    ok(!read_both("device 0's events extended after device 1's", &p, 5), "  left to the whole reading");
}

/* Every shared snapshot: taken streamed, and the same as the whole reading. */
static void test_shared(void)
{
    char dir[1024], path[2048];
    tap_shared_path("data/pytorch-snapshots", dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d) {
        printf("ok %d # SKIP %s not found (set OOMLAB_SHARED)\n", ++tap_count, dir);
        return;
    }
    size_t files = 0, taken = 0, same = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        size_t n = strlen(ent->d_name);
        if (!(n > 7 && !strcmp(ent->d_name + n - 7, ".pickle")) && !(n > 4 && !strcmp(ent->d_name + n - 4, ".pkl")))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        FILE *f = fopen(path, "rb");
        unsigned char *data = NULL;
        long len = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
        if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)len)) && fread(data, 1, (size_t)len, f) == (size_t)len) {
            struct snapshot s, w;
            struct err e = {0};
            files++;
            bool streamed = snapshot_parse_streamed(ent->d_name, data, (size_t)len, &s) == 0;
            bool whole = snapshot_parse_whole(ent->d_name, data, (size_t)len, &w, &e) == 0;
            size_t at;
            const char *differs = streamed && whole ? snapshot_difference(&s, &w, &at) : "a reading failed";
            taken += streamed;
            same += !differs;
            if (differs)
                diag("%s: %s", ent->d_name, differs);
            if (streamed)
                snapshot_free(&s);
            if (whole)
                snapshot_free(&w);
        }
        free(data);
        if (f)
            fclose(f);
    }
    closedir(d);
    ok(files >= 11, "%zu shared snapshots read", files);
    is_int(taken, files, "every one taken by the streamed reading");
    is_int(same, files, "every one the same as the whole reading, field by field");
}

int main(void)
{
    test_shapes();
    test_shared();
    return done_testing();
}
