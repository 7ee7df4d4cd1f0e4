/* snapshot_bounds_test.c: the snapshot reader's work is bounded by its input. Pickles written here
 * share values through the memo: N references to a segment whose block list is N references to one
 * block (N^2 blocks from O(N) bytes) are refused with a clear message, while the same shape at a size
 * the file can hold loads; so are N events taking turns between two lists of N references to one C++
 * frame (N^2 frames to fold); a block dict of 30,000 keys listed 30,000 times loads in well under a
 * second (dict lookups were linear: 16 s); a file over SNAPSHOT_MAX_BYTES is refused before reading. */
#include <time.h>
#include <unistd.h>

#include "replay/snapshot_file.h"
#include "tap.h"

struct raw {
    unsigned char *b;
    size_t len, cap;
};

static void put(struct raw *r, const void *bytes, size_t n)
{
    if (r->len + n > r->cap) {
        r->cap = 2 * (r->len + n);
        r->b = realloc(r->b, r->cap);
        if (!r->b)
            exit(1);
    }
    memcpy(r->b + r->len, bytes, n);
    r->len += n;
}

static void op(struct raw *r, unsigned char c)
{
    put(r, &c, 1);
}

static void str(struct raw *r, const char *s) /* SHORT_BINUNICODE */
{
    op(r, 0x8c);
    op(r, (unsigned char)strlen(s));
    put(r, s, strlen(s));
}

static void u32(struct raw *r, uint32_t v) /* BININT: values below 2^31 */
{
    unsigned char b[5] = {'J', (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(r, b, 5);
}

static void key_u32(struct raw *r, const char *k, uint32_t v)
{
    str(r, k);
    u32(r, v);
}

static void memo_put(struct raw *r, uint32_t i) /* LONG_BINPUT */
{
    unsigned char b[5] = {'r', (unsigned char)i, (unsigned char)(i >> 8), (unsigned char)(i >> 16),
                          (unsigned char)(i >> 24)};
    put(r, b, 5);
}

static void memo_get(struct raw *r, uint32_t i) /* BINGET below 256 */
{
    unsigned char b[2] = {'h', (unsigned char)i};
    put(r, b, 2);
}

/* A block dict (memo 1) of 4 real keys and `filler` more, listed `nblocks` times in its segment's
 * block list; the segment dict (memo 2) is listed `nsegs` times. */
static struct raw shared_snapshot(size_t nsegs, size_t nblocks, size_t filler)
{
    struct raw r = {0};
    put(&r, "\x80\x02}(", 4); /* PROTO 2, EMPTY_DICT, MARK */
    str(&r, "segments");
    put(&r, "](", 2);
    put(&r, "}(", 2); /* the segment */
    str(&r, "device"), u32(&r, 0);
    key_u32(&r, "address", 1 << 20);
    key_u32(&r, "total_size", 512 * (uint32_t)(nblocks + 1));
    key_u32(&r, "allocated_size", 0), key_u32(&r, "active_size", 0), key_u32(&r, "requested_size", 0);
    key_u32(&r, "stream", 0);
    str(&r, "segment_type"), str(&r, "large");
    str(&r, "blocks");
    put(&r, "](", 2);
    put(&r, "}(", 2); /* the block */
    key_u32(&r, "size", 512), key_u32(&r, "requested_size", 512), key_u32(&r, "address", 1 << 20);
    str(&r, "state"), str(&r, "inactive");
    for (size_t i = 0; i < filler; i++) {
        char k[24];
        snprintf(k, sizeof k, "k%zu", i);
        str(&r, k);
        op(&r, 'N');
    }
    op(&r, 'u'); /* SETITEMS */
    memo_put(&r, 1);
    for (size_t i = 1; i < nblocks; i++)
        memo_get(&r, 1);
    op(&r, 'e'); /* APPENDS: the block list */
    op(&r, 'u'); /* SETITEMS: the segment */
    memo_put(&r, 2);
    for (size_t i = 1; i < nsegs; i++)
        memo_get(&r, 2);
    op(&r, 'e');
    str(&r, "device_traces");
    put(&r, "]]a", 3); /* [[]] */
    op(&r, 'u');
    op(&r, '.');
    return r;
}

/* snapshot_parse of r, timed: its return code, with the seconds it took in *took. */
static int timed_parse(const char *name, const struct raw *r, struct snapshot *s, struct err *e, double *took)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = snapshot_parse(name, r->b, r->len, s, e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return rc;
}

static void test_shared_objects(void)
{
    struct raw r = shared_snapshot(3000, 3000, 0);
    struct snapshot s;
    struct err e = {0};
    double took;
    int rc = timed_parse("square.pickle", &r, &s, &e, &took);
    ok(rc == -1 && e.code == ERR_INPUT, "3000 references to a segment of 3000 references to one block (%zu bytes) "
                                        "are refused", r.len);
    ok(strstr(e.msg, "square.pickle: segments[") && strstr(e.msg, "refusing to expand it"), "saying why (%s)", e.msg);
    ok(took < 1.0, "at once (%.3f s), allocating nothing like 9 million blocks", took);
    free(r.b);

    r = shared_snapshot(10, 10, 0);
    e = (struct err){0};
    rc = timed_parse("small.pickle", &r, &s, &e, &took);
    ok(rc == 0, "the same shape with 10 x 10 (%zu bytes) loads%s%s", r.len, e.msg[0] ? ": " : "", e.msg);
    if (rc == 0) {
        is_int(s.nsegments, 10, "10 segments");
        is_int(s.segments[9].nblocks, 10, "of 10 blocks each");
        snapshot_free(&s);
    }
    free(r.b);
}

/* N events taking turns between two event dicts whose frames are two lists of `depth` references to one
 * native frame (memo 1): every event folds a whole list. */
static struct raw shared_frames(size_t nevents, size_t depth)
{
    struct raw r = {0};
    put(&r, "\x80\x02}(", 4);
    str(&r, "segments");
    put(&r, "]", 1);
    str(&r, "device_traces");
    put(&r, "]](", 3); /* the list of traces, device 0's trace, MARK */
    for (uint32_t e = 0; e < 2; e++) {
        put(&r, "}(", 2);
        str(&r, "action"), str(&r, "free_completed");
        key_u32(&r, "addr", 4096), key_u32(&r, "size", 512), key_u32(&r, "stream", 0);
        str(&r, "frames");
        put(&r, "](", 2);
        if (e == 0) {
            put(&r, "}(", 2);
            str(&r, "filename"), str(&r, "??");
            key_u32(&r, "line", 0);
            str(&r, "name"), str(&r, "torch::unwind::unwind()");
            op(&r, 'u');
            memo_put(&r, 1);
        } else {
            memo_get(&r, 1);
        }
        for (size_t i = 1; i < depth; i++)
            memo_get(&r, 1);
        op(&r, 'e');   /* APPENDS: the frames */
        op(&r, 'u');   /* SETITEMS: the event */
        memo_put(&r, 2 + e);
    }
    for (size_t i = 2; i < nevents; i++)
        memo_get(&r, 2 + i % 2);
    put(&r, "ea", 2); /* APPENDS: the trace; APPEND it to the list of traces */
    op(&r, 'u');
    op(&r, '.');
    return r;
}

static void test_shared_frames(void)
{
    struct raw r = shared_frames(3000, 3000);
    struct snapshot s;
    struct err e = {0};
    double took;
    int rc = timed_parse("frames.pickle", &r, &s, &e, &took);
    ok(rc == -1 && e.code == ERR_INPUT, "3000 events taking turns between two lists of 3000 frames (%zu bytes) are "
                                        "refused", r.len);
    ok(strstr(e.msg, "frames.pickle: device_traces[0][") && strstr(e.msg, "more frames would exceed one record per "
                                                                      "byte"),
       "saying why (%s)", e.msg);
    ok(took < 1.0, "at once (%.3f s), folding nothing like 9 million frames", took);
    free(r.b);

    r = shared_frames(10, 10);
    e = (struct err){0};
    rc = timed_parse("frames.pickle", &r, &s, &e, &took);
    ok(rc == 0, "the same shape with 10 x 10 (%zu bytes) loads%s%s", r.len, e.msg[0] ? ": " : "", e.msg);
    if (rc == 0) {
        ok(s.nevents == 10 && s.event_sites[9] && !strcmp(s.event_sites[9], "??:0 torch::unwind::unwind()"),
           "10 events, each folded to its innermost frame");
        snapshot_free(&s);
    }
    free(r.b);
}

static void test_big_shared_dict(void)
{
    struct raw r = shared_snapshot(1, 30000, 30000);
    struct snapshot s;
    struct err e = {0};
    double took;
    int rc = timed_parse("wide.pickle", &r, &s, &e, &took);
    ok(rc == 0, "a 30,000-key block dict listed 30,000 times (%zu bytes) loads%s%s", r.len, e.msg[0] ? ": " : "",
       e.msg);
    ok(took < 2.0, "in %.3f s (linear lookups took 16 s)", took);
    if (rc == 0) {
        is_int(s.segments[0].nblocks, 30000, "30,000 blocks");
        is_u64(s.segments[0].blocks[29999].size, 512, "each read through the index");
        snapshot_free(&s);
    }
    free(r.b);
}

static void test_file_limit(void)
{
    char path[] = "/tmp/oomlab-big-snapshot.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, (off_t)SNAPSHOT_MAX_BYTES + 1) != 0) { /* sparse: no disk used */
        printf("ok %d # SKIP cannot make a sparse file in /tmp\n", ++tap_count);
        if (fd >= 0)
            close(fd), unlink(path);
        return;
    }
    close(fd);
    struct snapshot s;
    struct err e = {0};
    ok(snapshot_load(path, &s, &e) == -1 && e.code == ERR_INPUT, "a file of 2 GiB + 1 byte is refused");
    ok(strstr(e.msg, "larger than 2147483648 bytes (2 GiB), the largest snapshot oomlab reads") != NULL,
       "before reading it (%s)", e.msg);
    unlink(path);
}

int main(void)
{
    test_shared_objects();
    test_shared_frames();
    test_big_shared_dict();
    test_file_limit();
    return done_testing();
}
