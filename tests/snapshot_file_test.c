/* snapshot_file_test.c: the snapshot reader on small snapshots written here as Python literals (a
 * test-only writer turns them into protocol 2 pickle bytes), with every error message checked
 * exactly, and on the 11 real snapshots in ../shared/data/pytorch-snapshots, whose counts were
 * obtained independently with Python's pickle module (skipped when the shared folder is missing).
 * Devices: each device with segments or a non-empty trace is read. Sites: recorded frames fold to the
 * user's innermost frame (replay/frame_site.h), checked on literals and on the real files' own. */
#include <ctype.h>
#include <unistd.h>

#include "replay/snapshot_file.h"
#include "tap.h"

/* ---- a Python-literal to pickle writer: dicts, lists, tuples, 'str', ints, floats, True, False, None ---- */

struct writer {
    const char *src;
    unsigned char out[16384];
    size_t len;
};

static void emit(struct writer *w, const void *bytes, size_t n)
{
    if (w->len + n > sizeof w->out) {
        diag("literal too large for the test writer");
        exit(1);
    }
    memcpy(w->out + w->len, bytes, n);
    w->len += n;
}

static void emit_byte(struct writer *w, unsigned char b)
{
    emit(w, &b, 1);
}

static void emit_le(struct writer *w, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        emit_byte(w, (unsigned char)(v >> (8 * i)));
}

static void skip_space(struct writer *w)
{
    while (isspace((unsigned char)*w->src))
        w->src++;
}

static void write_value(struct writer *w);

/* Items up to `close`, separated by commas; a dict's items are key: value pairs. */
static void write_items(struct writer *w, char close, bool pairs)
{
    emit_byte(w, '('); /* MARK */
    for (skip_space(w); *w->src != close; skip_space(w)) {
        write_value(w);
        skip_space(w);
        if (pairs && *w->src == ':') {
            w->src++;
            write_value(w);
            skip_space(w);
        }
        if (*w->src == ',')
            w->src++;
    }
    w->src++;
}

static void write_string(struct writer *w)
{
    const char *end = strchr(++w->src, '\'');
    emit_byte(w, 'X'); /* BINUNICODE */
    emit_le(w, (uint64_t)(end - w->src), 4);
    emit(w, w->src, (size_t)(end - w->src));
    w->src = end + 1;
}

static void write_number(struct writer *w)
{
    char *end;
    strtod(w->src, &end);
    if (memchr(w->src, '.', (size_t)(end - w->src))) {
        double d = strtod(w->src, &end);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        emit_byte(w, 'G'); /* BINFLOAT, big-endian */
        for (int i = 7; i >= 0; i--)
            emit_byte(w, (unsigned char)(bits >> (8 * i)));
    } else if (*w->src == '-') {
        emit_byte(w, 0x8a); /* LONG1, 8 bytes */
        emit_byte(w, 8);
        emit_le(w, (uint64_t)strtoll(w->src, &end, 10), 8);
    } else {
        emit_byte(w, 0x8a); /* LONG1, 9 bytes: any uint64 */
        emit_byte(w, 9);
        emit_le(w, strtoull(w->src, &end, 10), 8);
        emit_byte(w, 0);
    }
    w->src = end;
}

static void write_value(struct writer *w)
{
    skip_space(w);
    char c = *w->src;
    if (c == '{') {
        w->src++;
        emit_byte(w, '}'); /* EMPTY_DICT */
        write_items(w, '}', true);
        emit_byte(w, 'u'); /* SETITEMS */
    } else if (c == '[') {
        w->src++;
        emit_byte(w, ']'); /* EMPTY_LIST */
        write_items(w, ']', false);
        emit_byte(w, 'e'); /* APPENDS */
    } else if (c == '(') {
        w->src++;
        write_items(w, ')', false);
        emit_byte(w, 't'); /* TUPLE */
    } else if (c == '\'') {
        write_string(w);
    } else if (strncmp(w->src, "True", 4) == 0 || strncmp(w->src, "False", 5) == 0) {
        emit_byte(w, c == 'T' ? 0x88 : 0x89);
        w->src += c == 'T' ? 4 : 5;
    } else if (strncmp(w->src, "None", 4) == 0) {
        emit_byte(w, 'N');
        w->src += 4;
    } else {
        write_number(w);
    }
}

static const struct writer *pickled(const char *literal)
{
    static struct writer w;
    w.src = literal;
    w.len = 0;
    emit(&w, "\x80\x02", 2);
    write_value(&w);
    emit_byte(&w, '.');
    return &w;
}

/* ---- helpers ---- */

static int load_literal(const char *literal, struct snapshot *s)
{
    const struct writer *w = pickled(literal);
    struct err e = {0};
    if (snapshot_parse("snap.pickle", w->out, w->len, s, &e)) {
        diag("unexpected error: %s", e.msg);
        return -1;
    }
    return 0;
}

/* Parses a literal that must fail; the message, in a static buffer. */
static const char *literal_error(const char *literal)
{
    static struct err e;
    struct snapshot s;
    const struct writer *w = pickled(literal);
    memset(&e, 0, sizeof e);
    if (snapshot_parse("snap.pickle", w->out, w->len, &s, &e) == 0) {
        snapshot_free(&s);
        return "(parsed without error)";
    }
    if (s.segments || s.events || s.devices || s.sites || s.alloc_conf || e.code != ERR_INPUT)
        return "(failure left data behind or used another error code)";
    return e.msg;
}

#define SEG(dev, addr, blocks)                                                                                  \
    "{'device': " #dev ", 'address': " #addr ", 'total_size': 2097152, 'allocated_size': 512, 'active_size': 512, " \
    "'requested_size': 500, 'stream': 0, 'segment_type': 'small', 'segment_pool_id': (0, 0), "                   \
    "'is_expandable': False, 'frames': [], 'blocks': " blocks "}"
#define BLOCKS2                                                                                                 \
    "[{'address': 4096, 'size': 512, 'requested_size': 500, 'state': 'active_allocated', 'frames': []}, "          \
    "{'address': 4608, 'size': 2096640, 'requested_size': 0, 'state': 'inactive', 'frames': []}]"

/* ---- synthetic snapshots ---- */

static void test_dict_format(void)
{
    struct snapshot s;
    const char *lit =
        "{'segments': ["
        "{'device': 0, 'address': 8388608, 'total_size': 20971520, 'allocated_size': 0, 'active_size': 1024, "
        "'requested_size': 1000, 'stream': 140000000000000, 'segment_type': 'large', 'segment_pool_id': (1, -2), "
        "'is_expandable': True, 'frames': [{'filename': 'x.py', 'line': 3, 'name': 'f'}], "
        "'blocks': [{'address': 8388608, 'size': 1024, 'requested_size': 1000, 'state': 'active_pending_free'}, "
        "{'address': 8389632, 'size': 20970496, 'state': 'inactive'}]}, " SEG(0, 4096, BLOCKS2) "], "
        "'device_traces': [["
        "{'action': 'segment_alloc', 'addr': 4096, 'size': 2097152, 'stream': 0, 'time_us': 1, 'frames': []}, "
        "{'action': 'alloc', 'addr': 4096, 'size': 500, 'stream': 0}, "
        "{'action': 'free_requested', 'addr': 4096, 'size': 500, 'stream': 0}, "
        "{'action': 'free_completed', 'addr': 4096, 'size': 500, 'stream': 0}, "
        "{'action': 'segment_free', 'addr': 4096, 'size': 2097152, 'stream': 0}, "
        "{'action': 'segment_map', 'addr': 8192, 'size': 4096, 'stream': 0}, "
        "{'action': 'segment_unmap', 'addr': 8192, 'size': 4096, 'stream': 0}, "
        "{'action': 'snapshot', 'addr': 0, 'size': 512, 'stream': 0}, "
        "{'action': 'oom', 'device_free': 1048576, 'size': 4194304, 'stream': 7}, "
        "{'action': 'annotate', 'name': 'step'}, "
        "{'action': 'future_action', 'addr': 5, 'size': 6, 'stream': 7}]], "
        "'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True', 'max_split_size': 209715200, "
        "'garbage_collection_threshold': 0.6, 'expandable_segments': True, 'roundup_power2_divisions': {'1': 0}}, "
        "'external_annotations': []}";
    if (!ok(load_literal(lit, &s) == 0, "a _dump_snapshot dict loads"))
        return;
    is_int(s.format, SNAP_FORMAT_DICT, "format: dict");
    ok(s.ndevices == 1 && s.devices[0].device == 0, "device 0 only");
    is_int(s.nsegments, 2, "two segments");
    is_u64(s.segments[0].address, 4096, "segments sorted by address");
    const struct segment_info *big = &s.segments[1];
    is_u64(big->total_size, 20971520, "total_size");
    is_u64(big->allocated_size, 0, "allocated_size");
    is_u64(big->active_size, 1024, "active_size");
    is_u64(big->requested_size, 1000, "requested_size");
    is_u64(big->stream, UINT64_C(140000000000000), "stream (a raw pointer value)");
    ok(!big->small && s.segments[0].small, "segment_type large/small");
    ok(big->is_expandable && !s.segments[0].is_expandable, "is_expandable");
    ok(big->segment_pool_id[0] == 1 && big->segment_pool_id[1] == -2, "segment_pool_id");
    is_str(big->site, "x.py:3 f", "a segment's frames fold to its site");
    ok(s.segments[0].site == NULL, "no frames, no site");
    is_int(big->nblocks, 2, "two blocks");
    is_int(big->blocks[0].state, BLOCK_ACTIVE_PENDING_FREE, "active_pending_free");
    is_int(big->blocks[1].state, BLOCK_INACTIVE, "inactive");
    is_u64(big->blocks[1].address, 8389632, "block address");
    is_u64(big->blocks[1].requested_size, 0, "a block without requested_size reads 0");
    is_int(s.segments[0].blocks[0].state, BLOCK_ACTIVE_ALLOCATED, "active_allocated");
    is_int(s.nevents, 11, "eleven events");
    ok(s.devices[0].events == s.events && s.devices[0].nevents == 11 && s.devices[0].segments == s.segments &&
           s.devices[0].nsegments == 2,
       "device 0 holds them all");
    static const enum alloc_action want[] = {ACT_SEGMENT_ALLOC,  ACT_ALLOC,         ACT_FREE_REQUESTED,
                                             ACT_FREE_COMPLETED, ACT_SEGMENT_FREE,  ACT_SEGMENT_MAP,
                                             ACT_SEGMENT_UNMAP,  ACT_SNAPSHOT,      ACT_OOM,
                                             ACT_OTHER,          ACT_OTHER};
    int same = s.nevents == 11;
    for (size_t i = 0; same && i < 11; i++)
        same = s.events[i].action == want[i];
    ok(same, "every action maps, unknown ones to ACT_OTHER");
    ok(s.event_sites[0] == NULL && s.event_sites[1] == NULL, "events with empty or no frames have no site");
    is_u64(s.events[1].size, 500, "alloc size");
    is_u64(s.events[8].addr, 1048576, "oom: addr holds device_free");
    is_u64(s.events[8].stream, 7, "oom stream");
    ok(s.events[9].addr == 0 && s.events[9].size == 0, "an unknown action without addr or size reads 0");
    ok(s.events[10].addr == 5 && s.events[10].size == 6 && s.events[10].stream == 7, "an unknown action's fields");
    ok(s.has_settings, "allocator_settings present");
    is_str(s.alloc_conf, "expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF");
    ok(s.expandable_segments, "expandable_segments");
    is_int(s.max_split_size, 209715200, "max_split_size");
    ok(s.garbage_collection_threshold == 0.6, "garbage_collection_threshold");
    snapshot_free(&s);
    ok(s.segments == NULL && s.nsegments == 0, "snapshot_free leaves an empty snapshot");
    snapshot_free(&s);
}

static void test_defaults(void)
{
    struct snapshot s;
    if (!ok(load_literal("{'segments': [], 'device_traces': []}", &s) == 0, "an empty dict snapshot loads"))
        return;
    ok(s.nsegments == 0 && s.nevents == 0 && s.ndevices == 0 && s.devices == NULL, "nothing in it, no device");
    ok(!s.has_settings && s.alloc_conf == NULL && !s.expandable_segments && s.max_split_size == -1 &&
           s.garbage_collection_threshold == 0,
       "settings default to PyTorch's");
    snapshot_free(&s);
    if (load_literal("{'segments': [], 'device_traces': [], 'allocator_settings': {'max_split_size': -1, "
                     "'garbage_collection_threshold': 0, 'expandable_segments': False}}",
                     &s) == 0) {
        ok(s.has_settings && s.alloc_conf == NULL, "settings without PYTORCH_CUDA_ALLOC_CONF give NULL");
        ok(s.garbage_collection_threshold == 0.0, "an int threshold reads as a float");
        snapshot_free(&s);
    }
}

static void test_list_format(void)
{
    struct snapshot s;
    if (!ok(load_literal("[" SEG(3, 4096, BLOCKS2) "]", &s) == 0, "a bare list of segments loads"))
        return;
    is_int(s.format, SNAP_FORMAT_SEGMENT_LIST, "format: segment list");
    ok(s.ndevices == 1 && s.devices[0].device == 3 && s.segments[0].device == 3, "device from the segments");
    ok(s.nsegments == 1 && s.segments[0].nblocks == 2 && s.nevents == 0 && !s.has_settings, "one segment, no trace");
    snapshot_free(&s);
}

static void test_torch20_format(void)
{
    struct snapshot s;
    const char *lit = "{'segments': [{'device': 0, 'address': 1048576, 'total_size': 2097152, 'allocated_size': 1536, "
                      "'active_size': 1536, 'requested_size': 1500, 'stream': 0, 'segment_type': 'small', 'blocks': ["
                      "{'size': 512, 'requested_size': 500, 'state': 'active_allocated', "
                      "'history': [{'addr': 1048576, 'real_size': 500, 'frames': ["
                      "{'filename': '/env/lib/python3.10/site-packages/torch/nn/modules/linear.py', 'line': 114, "
                      "'name': 'forward'}, {'filename': '/home/u/model.py', 'line': 12, 'name': 'forward'}]}]}, "
                      "{'size': 1024, 'requested_size': 1000, 'state': 'active_allocated', "
                      "'history': [{'addr': 1048576, 'real_size': 8, 'frames': [{'filename': 'a.py', 'line': 1, "
                      "'name': 'older'}]}, {'addr': 1049088, 'real_size': 1000, 'frames': [{'filename': 'b.py', "
                      "'line': 2, 'name': 'current'}]}]}, "
                      "{'size': 2095616, 'requested_size': 0, 'state': 'inactive', "
                      "'history': [{'addr': 1050112, 'real_size': 8, 'frames': [{'filename': 'c.py', 'line': 3, "
                      "'name': 'freed'}]}]}]}], "
                      "'device_traces': [[{'action': 'snapshot', 'addr': 0, 'size': 1536, 'stream': 0}]]}";
    if (!ok(load_literal(lit, &s) == 0, "a torch 2.0 snapshot loads"))
        return;
    is_int(s.format, SNAP_FORMAT_TORCH20, "format: torch 2.0");
    ok(s.segments[0].segment_pool_id[0] == 0 && s.segments[0].segment_pool_id[1] == 0 && !s.segments[0].is_expandable,
       "missing pool id and is_expandable default");
    is_u64(s.segments[0].blocks[0].address, 1048576, "first block at the segment address");
    is_u64(s.segments[0].blocks[1].address, 1049088, "second block after the first");
    is_u64(s.segments[0].blocks[2].address, 1050112, "a block without history follows too");
    is_str(s.segments[0].blocks[0].site, "model.py:12 forward", "a live block's site: its history's frames, folded");
    is_str(s.segments[0].blocks[1].site, "b.py:2 current", "... of the history entry at its address");
    ok(s.segments[0].blocks[2].site == NULL, "an inactive block has no site");
    snapshot_free(&s);
}

static void test_devices(void)
{
    struct snapshot s;
    const char *ev = "{'action': 'alloc', 'addr': 1, 'size': 2, 'stream': 0}";
    char lit[4096];
    snprintf(lit, sizeof lit, "{'segments': [%s], 'device_traces': [[%s], [%s, %s]]}", SEG(1, 4096, BLOCKS2), ev, ev,
             ev);
    if (load_literal(lit, &s) == 0) {
        ok(s.ndevices == 2 && s.devices[0].device == 0 && s.devices[0].nsegments == 0 && s.devices[0].nevents == 1 &&
               s.devices[0].segments == NULL,
           "device 0: its trace, no segments");
        ok(s.devices[1].device == 1 && s.devices[1].nsegments == 1 && s.devices[1].segments[0].address == 4096 &&
               s.devices[1].nevents == 2 && s.devices[1].events == s.events + 1,
           "device 1: its segment and device_traces[1]");
        ok(snapshot_device(&s, 1) == &s.devices[1] && snapshot_device(&s, 2) == NULL, "devices found by number");
        snapshot_free(&s);
    }
    snprintf(lit, sizeof lit, "{'segments': [], 'device_traces': [[], [%s]]}", ev);
    if (load_literal(lit, &s) == 0) {
        ok(s.ndevices == 1 && s.devices[0].device == 1 && s.devices[0].nevents == 1,
           "an empty trace is no device: device 1 only");
        snapshot_free(&s);
    }
    snprintf(lit, sizeof lit, "{'segments': [%s, %s, %s], 'device_traces': [[%s]]}", SEG(2, 16384, "[]"),
             SEG(0, 4096, BLOCKS2), SEG(2, 8192, "[]"), ev);
    if (load_literal(lit, &s) == 0) {
        ok(s.ndevices == 2 && s.devices[0].device == 0 && s.devices[0].nsegments == 1 &&
               s.devices[0].segments[0].address == 4096 && s.devices[0].nevents == 1,
           "segments on devices 0 and 2: device 0 with its segment and trace");
        ok(s.devices[1].device == 2 && s.devices[1].nsegments == 2 && s.devices[1].segments[0].address == 8192 &&
               s.devices[1].segments[1].address == 16384 && s.devices[1].nevents == 0,
           "device 2 with its segments sorted by address and no trace");
        snapshot_free(&s);
    }
    snprintf(lit, sizeof lit, "{'segments': [%s], 'device_traces': [[%s]]}", SEG(5, 4096, BLOCKS2), ev);
    if (load_literal(lit, &s) == 0) {
        ok(s.ndevices == 2 && s.devices[0].device == 0 && s.devices[1].device == 5 && s.devices[1].nsegments == 1 &&
               s.devices[1].nevents == 0,
           "a device with no trace entry has no events");
        snapshot_free(&s);
    }
}

/* A frame for the literals: F('file', line, 'name'). */
#define F(file, line, name) "{'filename': '" file "', 'line': " #line ", 'name': '" name "'}"
#define TORCH_PY F("/env/lib/python3.11/site-packages/torch/nn/modules/module.py", 1747, "_call_impl")
#define CPP1 F("??", 0, "torch::unwind::unwind()")
#define CPP2 F("", 0, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc")
#define CPP3 F("CUDACachingAllocator.cpp", 0, "malloc")
#define PYC F("Objects/methodobject.c", 543, "cfunction_call")
#define USER F("/home/u/proj/train.py", 88, "step")

/* The site one event with these frames folds to (static; "(none)" for NULL, "(error)" on failure). */
static const char *event_site(const char *frames)
{
    static char site[256];
    char lit[4096];
    snprintf(lit, sizeof lit,
             "{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, 'stream': 0, "
             "'frames': %s}]]}",
             frames);
    struct snapshot s;
    if (load_literal(lit, &s))
        return "(error)";
    snprintf(site, sizeof site, "%s", s.nevents == 1 && s.event_sites[0] ? s.event_sites[0] : "(none)");
    snapshot_free(&s);
    return site;
}

static void test_sites(void)
{
    is_str(event_site("[" CPP1 ", " CPP2 ", " CPP3 ", " TORCH_PY ", " PYC ", " USER ", " F("/home/u/proj/main.py", 9,
                                                                                         "main") "]"),
           "main.py:9 main > train.py:88 step",
           "C++, CPython's C and torch frames are skipped to the user's innermost frame, named after its user caller");
    is_str(event_site("[" F("/home/u/proj/train.py", 90, "<listcomp>") ", " TORCH_PY ", " USER "]"),
           "train.py:88 step", "a comprehension's frame counts as the function around it");
    is_str(event_site("[" F("/home/u/proj/train.py", 90, "<genexpr>") "]"), "train.py:90 <genexpr>",
           "... unless it is the only user frame");
    is_str(event_site("[" F("/usr/lib/python3.10/copy.py", 153, "deepcopy") ", " F("<frozen runpy>", 88, "_run_code")
                      ", " F("<string>", 1, "x") ", " F("/srv/venv/lib/python3.12/dist-packages/transformers/x.py", 4,
                                                        "y") ", " USER "]"),
           "train.py:88 step", "the standard library, <frozen ...>, <string> and dist-packages are skipped too");
    is_str(event_site("[" F("C:\\research\\.venv\\lib\\site-packages\\torch\\nn\\modules"
                            "\\module.py", 1357, "convert")
                      ", " F("C:\\Users\\z\\uv\\python\\cpython-3.10.19-windows-x86_64-none"
                             "\\lib\\copy.py", 153, "deepcopy")
                      ", " F("C:\\research\\DeComFL\\cezo_fl\\fl_helpers.py", 70, "model_forward")
                      "]"),
           "fl_helpers.py:70 model_forward", "Windows paths: torch, the standard library, the base name");
    is_str(event_site("[" F("/tmp/torchinductor_brian/bc/cbcx.py", 42, "call") ", " USER "]"), "train.py:88 step",
           "inductor's generated code is torch's");
    is_str(event_site("[" F("/home/u/torch/nn/x.py", 1, "f") ", " F("torch/utils/checkpoint.py", 2, "g") ", "
                      F("<ipython-input-3-abc>", 7, "<module>") "]"),
           "<ipython-input-3-abc>:7 <module>", "a torch/ directory anywhere in the path is torch's; a notebook cell is "
                                               "the user's");
    is_str(event_site("[" CPP1 ", " CPP2 ", " TORCH_PY ", " F("/env/lib/python3.11/site-packages/torch/cuda/memory.py", 218,
                                                              "empty_cache") "]"),
           "module.py:1747 _call_impl", "every frame torch's: the innermost Python frame");
    is_str(event_site("[" CPP1 ", " CPP2 ", " CPP3 "]"), "??:0 torch::unwind::unwind()",
           "no Python at all and no operator named: the innermost frame");
#define ATEN_MUL F("", 0, "at::_ops::mul_Tensor::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)")
#define MUL_NODE F("", 0, "torch::autograd::generated::MulBackward0::apply(std::vector<at::Tensor>&&)")
    is_str(event_site("[" CPP1 ", " CPP2 ", " ATEN_MUL ", " MUL_NODE "]"), "autograd MulBackward0",
           "autograd's engine thread: the backward node that allocated, over the operator inside it");
    is_str(event_site("[" CPP1 ", " ATEN_MUL "]"), "aten::mul_Tensor", "no node: the ATen operator");
    is_str(event_site("[" CPP1 ", " F("", 0, "torch::autograd::generated::SelectBackward0_apply_functional(x)") "]"),
           "autograd SelectBackward0", "a functional node's name without its suffix");
    is_str(event_site("[" ATEN_MUL ", " USER "]"), "train.py:88 step", "a Python frame of the user's still comes first");
    is_str(event_site("[]"), "(none)", "an empty list: no site");

    /* one site is one pointer, however many events, blocks and segments share it */
    struct snapshot s;
    char lit[8192];
    snprintf(lit, sizeof lit,
             "{'segments': [{'device': 0, 'address': 4096, 'total_size': 2097152, 'allocated_size': 512, "
             "'active_size': 512, 'requested_size': 500, 'stream': 0, 'segment_type': 'small', 'frames': [%s], "
             "'blocks': [{'address': 4096, 'size': 512, 'requested_size': 500, 'state': 'active_allocated', "
             "'frames': [%s, %s]}, {'address': 4608, 'size': 2096640, 'state': 'inactive', 'frames': []}]}], "
             "'device_traces': [[{'action': 'segment_alloc', 'addr': 4096, 'size': 2097152, 'stream': 0, 'frames': "
             "[%s, %s]}, {'action': 'alloc', 'addr': 4096, 'size': 500, 'stream': 0, 'frames': [%s, %s, %s]}]]}",
             USER, CPP1, USER, CPP3, USER, CPP2, TORCH_PY, USER);
    if (load_literal(lit, &s) == 0) {
        ok(s.segments[0].site && s.segments[0].site == s.segments[0].blocks[0].site &&
               s.segments[0].site == s.event_sites[0] && s.event_sites[0] == s.event_sites[1],
           "a segment, a block and two events with the same user frame share one interned site");
        is_str(s.event_sites[1], "train.py:88 step", "which reads as its frame");
        snapshot_free(&s);
    }

    /* frames are checked as they are read */
    is_str(literal_error("{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, "
                         "'stream': 0, 'frames': {}}]]}"),
           "snap.pickle: device_traces[0][0].frames: expected a list, got dict", "frames a dict");
    is_str(literal_error("{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, "
                         "'stream': 0, 'frames': [" CPP1 ", 'x.py']}]]}"),
           "snap.pickle: device_traces[0][0].frames[1]: expected a dict, got str", "a frame a str");
    is_str(literal_error("{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, "
                         "'stream': 0, 'frames': [{'line': 3, 'name': 'f'}]}]]}"),
           "snap.pickle: device_traces[0][0].frames[0]: missing key 'filename'", "a frame without filename");
    is_str(literal_error("{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, "
                         "'stream': 0, 'frames': [{'filename': 'a.py', 'line': '3', 'name': 'f'}]}]]}"),
           "snap.pickle: device_traces[0][0].frames[0].line: expected an int, got str", "a site's line a str");
    is_str(literal_error("[{'device': 0, 'address': 0, 'total_size': 0, 'allocated_size': 0, 'active_size': 0, "
                         "'requested_size': 0, 'stream': 0, 'segment_type': 'large', 'blocks': [{'size': 8, "
                         "'state': 'active_allocated', 'history': [{'addr': 0, 'frames': [{'filename': 'a.py', "
                         "'line': 1}]}]}]}]"),
           "snap.pickle: [0].blocks[0].history[0].frames[0]: missing key 'name'", "torch 2.0 history paths");
}

static void test_errors(void)
{
    char lit[4096];
    is_str(literal_error("'hello'"),
           "snap.pickle: top level: expected a dict (from _dump_snapshot) or a list of segments, got str",
           "top level a str");
    is_str(literal_error("(1, 2)"),
           "snap.pickle: top level: expected a dict (from _dump_snapshot) or a list of segments, got tuple",
           "top level a tuple");
    is_str(literal_error("{'device_traces': []}"), "snap.pickle: top level: missing key 'segments'", "no segments");
    is_str(literal_error("{'segments': []}"), "snap.pickle: top level: missing key 'device_traces'",
           "no device_traces");
    is_str(literal_error("{'segments': {}, 'device_traces': []}"),
           "snap.pickle: segments: expected a list, got dict", "segments a dict");
    is_str(literal_error("{'segments': [None], 'device_traces': []}"),
           "snap.pickle: segments[0]: expected a dict, got None", "a segment that is None");
    is_str(literal_error("{'segments': [], 'device_traces': [[], 7]}"),
           "snap.pickle: device_traces[1]: expected a list, got int", "a trace that is an int");
    is_str(literal_error("[{'address': 0}]"), "snap.pickle: [0]: missing key 'device'", "list format path");
    is_str(literal_error("[{'device': -1}]"), "snap.pickle: [0].device: expected a device index, got -1",
           "negative device");
    is_str(literal_error("[{'device': 'cuda:0'}]"), "snap.pickle: [0].device: expected an int, got str",
           "device a str");

    snprintf(lit, sizeof lit, "{'segments': [%s, %s], 'device_traces': []}", SEG(0, 4096, BLOCKS2),
             SEG(0, 2097152, "[{'address': 2097152, 'size': 1, 'state': 'inactive'}, "
                             "{'address': 2097153, 'size': 'big', 'state': 'inactive'}]"));
    is_str(literal_error(lit), "snap.pickle: segments[1].blocks[1].size: expected an int, got str",
           "wrong field type names the path");
    snprintf(lit, sizeof lit, "{'segments': [%s], 'device_traces': []}",
             SEG(0, 4096, "[{'address': 4096, 'size': -4, 'state': 'inactive'}]"));
    is_str(literal_error(lit), "snap.pickle: segments[0].blocks[0].size: expected a non-negative int, got -4",
           "negative size");
    snprintf(lit, sizeof lit, "{'segments': [%s], 'device_traces': []}",
             SEG(0, 4096, "[{'address': 4096, 'size': 4}]"));
    is_str(literal_error(lit), "snap.pickle: segments[0].blocks[0]: missing key 'state'", "block without state");
    snprintf(lit, sizeof lit, "{'segments': [%s], 'device_traces': []}",
             SEG(0, 4096, "[{'address': 4096, 'size': 4, 'state': 'active_awaiting_free'}]"));
    is_str(literal_error(lit),
           "snap.pickle: segments[0].blocks[0].state: unknown value 'active_awaiting_free' (expected "
           "'active_allocated', 'active_pending_free' or 'inactive')",
           "unknown block state");
    snprintf(lit, sizeof lit, "{'segments': [%s], 'device_traces': []}",
             SEG(0, 4096, "[{'address': 4096, 'size': 4, 'state': 'inactive'}, {'size': 4, 'state': 'inactive'}]"));
    is_str(literal_error(lit), "snap.pickle: segments[0].blocks[1]: missing key 'address'",
           "a block without address in a file whose blocks have addresses");
    is_str(literal_error("[{'device': 0, 'address': 0, 'total_size': 0, 'allocated_size': 0, 'active_size': 0, "
                         "'requested_size': 0, 'stream': 0, 'segment_type': 'huge', 'blocks': []}]"),
           "snap.pickle: [0].segment_type: unknown value 'huge' (expected 'large' or 'small')", "unknown segment_type");
    is_str(literal_error("[{'device': 0, 'address': 0, 'total_size': 0, 'allocated_size': 0, 'active_size': 0, "
                         "'requested_size': 0, 'stream': 0, 'segment_type': 'large', 'segment_pool_id': (1, 2, 3), "
                         "'blocks': []}]"),
           "snap.pickle: [0].segment_pool_id: expected a tuple of two ints, got a tuple of length 3", "pool id of 3");
    is_str(literal_error("[{'device': 0, 'address': 0, 'total_size': 0, 'allocated_size': 0, 'active_size': 0, "
                         "'requested_size': 0, 'stream': 0, 'segment_type': 'large', "
                         "'segment_pool_id': (0, 18446744073709551615), 'blocks': []}]"),
           "snap.pickle: [0].segment_pool_id[1]: expected an int below 2^63, got 18446744073709551615",
           "pool id beyond int64");
    is_str(literal_error("[{'device': 0, 'address': 0, 'total_size': 0, 'allocated_size': 0, 'active_size': 0, "
                         "'requested_size': 0, 'stream': 0, 'segment_type': 'large', 'is_expandable': 0, "
                         "'blocks': []}]"),
           "snap.pickle: [0].is_expandable: expected a bool, got int", "is_expandable an int");
    is_str(literal_error("[{'device': 0, 'address': 0, 'total_size': 0, 'allocated_size': 0, 'active_size': 0, "
                         "'stream': 0, 'segment_type': 'large', 'blocks': []}]"),
           "snap.pickle: [0]: missing key 'requested_size'", "segment without requested_size");
    is_str(literal_error("[{'device': 0, 'address': 0, 'total_size': 0, 'allocated_size': 0, 'active_size': 0, "
                         "'requested_size': 0, 'stream': 0, 'segment_type': 'large', 'blocks': ()}]"),
           "snap.pickle: [0].blocks: expected a list, got tuple", "blocks a tuple");

    is_str(literal_error("{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, 'stream': 0}, "
                         "{'action': 'free_completed', 'size': 2, 'stream': 0}]]}"),
           "snap.pickle: device_traces[0][1]: missing key 'addr'", "event without addr");
    is_str(literal_error("{'segments': [], 'device_traces': [[{'action': 'oom', 'addr': 1, 'size': 2, 'stream': 0}]]}"),
           "snap.pickle: device_traces[0][0]: missing key 'device_free'", "oom without device_free");
    is_str(literal_error("{'segments': [], 'device_traces': [[{'action': 7}]]}"),
           "snap.pickle: device_traces[0][0].action: expected a str, got int", "action an int");
    is_str(literal_error("{'segments': [], 'device_traces': [['alloc']]}"),
           "snap.pickle: device_traces[0][0]: expected a dict, got str", "event a str");
    is_str(literal_error("{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2.0, "
                         "'stream': 0}]]}"),
           "snap.pickle: device_traces[0][0].size: expected an int, got float", "size a float");

    is_str(literal_error("{'segments': [], 'device_traces': [], 'allocator_settings': []}"),
           "snap.pickle: allocator_settings: expected a dict, got list", "settings a list");
    is_str(literal_error("{'segments': [], 'device_traces': [], 'allocator_settings': {'expandable_segments': False, "
                         "'garbage_collection_threshold': 0.0}}"),
           "snap.pickle: allocator_settings: missing key 'max_split_size'", "settings without max_split_size");
    is_str(literal_error("{'segments': [], 'device_traces': [], 'allocator_settings': {'expandable_segments': False, "
                         "'max_split_size': -1, 'garbage_collection_threshold': 'x'}}"),
           "snap.pickle: allocator_settings.garbage_collection_threshold: expected a float, got str",
           "threshold a str");
    is_str(literal_error("{'segments': [], 'device_traces': [], 'allocator_settings': {'expandable_segments': False, "
                         "'max_split_size': -1, 'garbage_collection_threshold': 0.0, 'PYTORCH_CUDA_ALLOC_CONF': None}}"),
           "snap.pickle: allocator_settings.PYTORCH_CUDA_ALLOC_CONF: expected a str, got None", "conf None");

    const struct writer *w = pickled("{'segments': [], 'device_traces': []}");
    struct snapshot s;
    struct err e = {0};
    char want[128];
    snprintf(want, sizeof want, "snap.pickle: truncated pickle at byte %zu (no STOP opcode)", w->len - 1);
    ok(snapshot_parse("snap.pickle", w->out, w->len - 1, &s, &e) == -1 && strcmp(e.msg, want) == 0,
       "pickle errors come through: %s", e.msg);
    memset(&e, 0, sizeof e);
    ok(snapshot_load("/nonexistent/x.pickle", &s, &e) == -1 && e.code == ERR_INPUT &&
           strcmp(e.msg, "/nonexistent/x.pickle: cannot open: No such file or directory") == 0,
       "a missing file: %s", e.msg);
}

/* ---- the real snapshots ---- */

struct real_file {
    const char *name;
    enum snap_format format;
    size_t devices; /* with segments or a non-empty trace */
    int device;     /* the one counted below: where the segments are */
    size_t segments, blocks, events;
    size_t allocs, free_requested, free_completed, segment_allocs, segment_frees, small_segments;
    uint64_t reserved, allocated, requested;  /* sums over the segments' total_size, allocated_size, blocks' requested_size */
    bool settings;
};

/* Obtained with Python's pickle module from the same files. */
static const struct real_file real_files[] = {
    {"HugePandaCoder_octree-nca-groupeq__my_snapshot_1e496ac.pickle", SNAP_FORMAT_DICT, 1, 0, 51, 452, 3797, 1491, 1129,
     1129, 48, 0, 21, 20860370944, 3075039744, 19644439040, true},
    {"JasperSolt_EoR_NN__snapshot.pickle", SNAP_FORMAT_DICT, 1, 0, 10, 54, 5803, 1935, 1926, 1926, 7, 0, 4, 134217728,
     48760832, 87989633, false},
    {"Maphsge4_select_n__snapshot_5a60101.pickle", SNAP_FORMAT_DICT, 1, 0, 82, 415, 4496, 1497, 1493, 1493, 13, 0, 2,
     2776629248, 1875182080, 2696372200, false},
    {"Maphsge4_select_n__snapshot_ec5be11.pickle", SNAP_FORMAT_DICT, 1, 0, 136, 204, 10327, 3058, 3053, 3053, 584, 579,
     17, 18566086656, 16199101440, 18565737472, false},
    /* device 0's trace holds one snapshot marker; the segments and a free are device 1's */
    {"Muduard_LayoutEditing__dump_snapshot_7bced59.pickle", SNAP_FORMAT_DICT, 2, 1, 673, 6644, 1, 0, 0, 1, 0, 0, 240,
     11274289152, 10715782144, 11111242658, false},
    {"Muduard_LayoutEditing__memory_snapshot.pkl", SNAP_FORMAT_SEGMENT_LIST, 1, 1, 255, 2140, 0, 0, 0, 0, 0, 0, 132,
     3649044480, 3353639424, 3493143874, false},
    {"Yiyi-philosophy_LLM-inference__oom_snapshot.pickle", SNAP_FORMAT_TORCH20, 1, 0, 176, 463, 1, 0, 0, 0, 0, 0, 2,
     11844714496, 11840159744, 11840159744, false},
    {"ZidongLiu_DeComFL__memory.pickle", SNAP_FORMAT_DICT, 1, 0, 61, 468, 23105, 7946, 7549, 7549, 61, 0, 17, 1897922560,
     1014430208, 1920281068, true},
    {"cranberrii_ftcourse__memory_snapshot.pickle", SNAP_FORMAT_DICT, 1, 0, 215, 1079, 10307, 3505, 3325, 3325, 152, 0,
     51, 6471811072, 2297283072, 5073201448, false},
    {"jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle", SNAP_FORMAT_DICT, 1, 0, 7, 168, 1, 0, 0, 1, 0, 0, 6,
     33554432, 14503424, 18372524, false},
    {"silmont2000_assignment2-systems__mem_snapshot.pickle", SNAP_FORMAT_DICT, 1, 0, 9, 20, 97, 36, 26, 26, 9, 0, 1,
     3781165056, 31719936, 3791912968, true},
};

static size_t count_action(const struct snapshot_device *s, enum alloc_action a)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nevents; i++)
        n += s->events[i].action == a;
    return n;
}

/* Blocks tile their segment in address order, allocated_size sums the allocated blocks, and the
 * segments are sorted: what PyTorch's snapshot() guarantees, so a misread field shows up here. */
static bool segments_consistent(const struct snapshot_device *s)
{
    for (size_t i = 0; i < s->nsegments; i++) {
        const struct segment_info *g = &s->segments[i];
        uint64_t at = g->address, allocated = 0;
        if (i && s->segments[i - 1].address >= g->address)
            return false;
        for (size_t j = 0; j < g->nblocks; j++) {
            if (g->blocks[j].address != at)
                return false;
            at += g->blocks[j].size;
            allocated += g->blocks[j].state == BLOCK_ACTIVE_ALLOCATED ? g->blocks[j].size : 0;
        }
        if (at != g->address + g->total_size || allocated != g->allocated_size)
            return false;
    }
    return true;
}

static void check_real_file(const struct real_file *f)
{
    char path[1024], rel[512];
    snprintf(rel, sizeof rel, "data/pytorch-snapshots/%s", f->name);
    tap_shared_path(rel, path, sizeof path);
    struct snapshot s;
    struct err e = {0};
    if (!ok(snapshot_load(path, &s, &e) == 0, "%s loads", f->name)) {
        diag("%s", e.msg);
        return;
    }
    const struct snapshot_device *d = snapshot_device(&s, f->device);
    if (!ok(d && s.ndevices == f->devices, "%s: %zu devices, device %d among them", f->name, s.ndevices, f->device)) {
        snapshot_free(&s);
        return;
    }
    size_t blocks = 0, small = 0;
    uint64_t reserved = 0, allocated = 0, requested = 0;
    for (size_t i = 0; i < d->nsegments; i++) {
        blocks += d->segments[i].nblocks;
        small += d->segments[i].small;
        reserved += d->segments[i].total_size;
        allocated += d->segments[i].allocated_size;
        for (size_t j = 0; j < d->segments[i].nblocks; j++)
            requested += d->segments[i].blocks[j].requested_size;
    }
    bool counts = s.format == f->format && d->nsegments == f->segments && blocks == f->blocks &&
                  d->nevents == f->events && small == f->small_segments && s.has_settings == f->settings;
    bool actions = count_action(d, ACT_ALLOC) == f->allocs && count_action(d, ACT_FREE_REQUESTED) == f->free_requested &&
                   count_action(d, ACT_FREE_COMPLETED) == f->free_completed &&
                   count_action(d, ACT_SEGMENT_ALLOC) == f->segment_allocs &&
                   count_action(d, ACT_SEGMENT_FREE) == f->segment_frees;
    ok(counts, "%s: format %d, device %d: %zu segments (%zu small), %zu blocks, %zu events", f->name, s.format,
       d->device, d->nsegments, small, blocks, d->nevents);
    ok(actions, "%s: %zu alloc, %zu free_completed, %zu segment_alloc, %zu segment_free", f->name,
       count_action(d, ACT_ALLOC), count_action(d, ACT_FREE_COMPLETED), count_action(d, ACT_SEGMENT_ALLOC),
       count_action(d, ACT_SEGMENT_FREE));
    ok(reserved == f->reserved && allocated == f->allocated && requested == f->requested,
       "%s: %" PRIu64 " reserved, %" PRIu64 " allocated, %" PRIu64 " requested bytes", f->name, reserved, allocated,
       requested);
    ok(segments_consistent(d), "%s: blocks tile their segments, sorted by address", f->name);
    snapshot_free(&s);
}

/* How many of device d's events of action a have the site `site`, and their bytes. */
static size_t count_site(const struct snapshot_device *d, enum alloc_action a, const char *site, uint64_t *bytes)
{
    size_t n = 0;
    *bytes = 0;
    for (size_t i = 0; i < d->nevents; i++) {
        if (d->events[i].action != a || !d->event_sites[i] || strcmp(d->event_sites[i], site))
            continue;
        n++;
        *bytes += d->events[i].size;
    }
    return n;
}

/* Distinct sites of device d's events (interned: distinct pointers). */
static size_t distinct_event_sites(const struct snapshot_device *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->nevents; i++) {
        bool seen = !d->event_sites[i];
        for (size_t k = 0; k < i && !seen; k++)
            seen = d->event_sites[k] == d->event_sites[i];
        n += !seen;
    }
    return n;
}

/* Sites of real files, against a Python fold of the same rule over the same frames. */
static void test_real_sites(void)
{
    char path[1024];
    struct snapshot s;
    struct err e = {0};
    uint64_t bytes;
    tap_shared_path("data/pytorch-snapshots/ZidongLiu_DeComFL__memory.pickle", path, sizeof path);
    if (snapshot_load(path, &s, &e) == 0) {
        is_int(distinct_event_sites(&s.devices[0]), 48, "DeComFL: 23,105 events from 48 sites");
        ok(count_site(&s.devices[0], ACT_ALLOC, "client.py:109 _loss_fn > model_helpers.py:70 model_forward",
                      &bytes) == 1066 && bytes == 896460104,
           "DeComFL: 1066 allocs (896,460,104 bytes) at client.py:109 _loss_fn > model_helpers.py:70 model_forward "
           "(its Windows path folded, torch's module.py frames skipped)");
        ok(count_site(&s.devices[0], ACT_ALLOC, "client.py:160 local_update > model_helpers.py:70 model_forward",
                      &bytes) == 532 && bytes == 443445924,
           "DeComFL: 532 more (443,445,924 bytes) through the other caller of model_forward");
        snapshot_free(&s);
    }
    tap_shared_path("data/pytorch-snapshots/kkaitlyn111_cs336-a2__memory_files_memory_ctx256_fullstep_.pickle", path,
                    sizeof path);
    if (snapshot_load(path, &s, &e) == 0) {
        ok(count_site(&s.devices[0], ACT_ALLOC, "benchmark.py:234 run_memory_foward_fullstep > optimizers.py:100 step",
                      &bytes) == 582 && bytes == 27254476800,
           "kkaitlyn fullstep: 582 allocs at optimizers.py:100 step, behind some 20 C++ and CPython frames each");
        ok(count_site(&s.devices[0], ACT_ALLOC, "autograd DivBackward0", &bytes) == 582 && bytes == 9850589184,
           "kkaitlyn fullstep: on autograd's engine thread, which records no Python, 582 allocs (9,850,589,184 "
           "bytes) at the backward node DivBackward0");
        ok(count_site(&s.devices[0], ACT_ALLOC, "aten::sum_dim_IntList", &bytes) == 325 && bytes == 1372475424,
           "kkaitlyn fullstep: 325 (1,372,475,424 bytes) at aten::sum_dim_IntList, outside any node");
        ok(count_site(&s.devices[0], ACT_ALLOC, "??:0 torch::unwind::unwind()", &bytes) == 0,
           "kkaitlyn fullstep: none left at the unwinder's frame");
        snapshot_free(&s);
    }
    /* issue 14: all 11.03 GiB the Yiyi OOM snapshot holds come from one site. Its user's innermost frame is
     * FlexGen's allocation helper (TorchDevice.allocate, calling torch.empty), called from
     * flex_opt.py:125 init_weight_list for every one of the 460 blocks: the site names both. */
    tap_shared_path("data/pytorch-snapshots/Yiyi-philosophy_LLM-inference__oom_snapshot.pickle", path, sizeof path);
    if (snapshot_load(path, &s, &e) == 0) {
        size_t live = 0, at_site = 0;
        uint64_t held = 0;
        const char *site = NULL;
        for (size_t i = 0; i < s.nsegments; i++)
            for (size_t k = 0; k < s.segments[i].nblocks; k++) {
                const struct block_info *b = &s.segments[i].blocks[k];
                if (!block_state_live(b->state))
                    continue;
                live++;
                site = site ? site : b->site;
                if (b->site && b->site == site) {
                    at_site++;
                    held += b->size;
                }
            }
        is_str(site, "flex_opt.py:125 init_weight_list > pytorch_backend.py:190 allocate",
               "Yiyi OOM: the live blocks' site");
        ok(live == 460 && at_site == 460 && held == 11840159744,
           "Yiyi OOM: all %zu live blocks, 11,840,159,744 bytes (11.03 GiB), at that one site", live);
        snapshot_free(&s);
    }
}

static void test_real_details(void)
{
    char path[1024];
    struct snapshot s;
    struct err e = {0};
    tap_shared_path("data/pytorch-snapshots/ZidongLiu_DeComFL__memory.pickle", path, sizeof path);
    if (snapshot_load(path, &s, &e) == 0) {
        size_t mib20 = 0, mib2 = 0, mib148 = 0;
        for (size_t i = 0; i < s.nevents; i++) {
            if (s.events[i].action != ACT_SEGMENT_ALLOC)
                continue;
            mib20 += s.events[i].size == 20u << 20;
            mib2 += s.events[i].size == 2u << 20;
            mib148 += s.events[i].size == 148u << 20;
        }
        ok(mib20 == 37 && mib2 == 17 && mib148 == 7, "DeComFL segment_alloc sizes: 37 x 20 MiB, 17 x 2 MiB, 7 x 148 MiB");
        ok(s.alloc_conf && strcmp(s.alloc_conf, "") == 0 && s.max_split_size == -1 && !s.expandable_segments,
           "DeComFL settings: empty PYTORCH_CUDA_ALLOC_CONF, max_split_size -1");
        snapshot_free(&s);
    }
    /* torch 2.0: block addresses computed from sizes match the addresses its history records */
    tap_shared_path("data/pytorch-snapshots/Yiyi-philosophy_LLM-inference__oom_snapshot.pickle", path, sizeof path);
    if (snapshot_load(path, &s, &e) == 0) {
        ok(s.segments[174].address == UINT64_C(140049249206272) &&
               s.segments[174].blocks[3].address == UINT64_C(140049249230848),
           "Yiyi: segments[174].blocks[3] at the address its history records");
        ok(s.segments[172].blocks[1].address == UINT64_C(140048817192960) + 411828224 &&
               s.segments[172].blocks[1].state == BLOCK_INACTIVE,
           "Yiyi: an inactive block without history follows its predecessor");
        is_int(s.events[0].action, ACT_SNAPSHOT, "Yiyi: the one event is the OOM observer's snapshot");
        snapshot_free(&s);
    }
}

static void test_real_files(void)
{
    char probe[1024];
    tap_shared_path("data/pytorch-snapshots", probe, sizeof probe);
    if (access(probe, R_OK) != 0) {
        printf("ok %d # SKIP %s not found (set OOMLAB_SHARED)\n", ++tap_count, probe);
        return;
    }
    for (size_t i = 0; i < sizeof real_files / sizeof real_files[0]; i++)
        check_real_file(&real_files[i]);
    test_real_details();
    test_real_sites();
}

int main(void)
{
    test_dict_format();
    test_defaults();
    test_list_format();
    test_torch20_format();
    test_devices();
    test_sites();
    test_errors();
    test_real_files();
    return done_testing();
}
