"""trace_io.t: the trace format written and read back, its errors (file:line:col), and summarize()."""
import os
import tempfile

from tap import done, eq, ok, raises
from oomlab_recorder.trace import (Alloc, Free, Mark, Phase, Step, Trace, TraceError, parse_trace, read_trace,
                                   rounded, summarize, write_trace)

tr = Trace(header=["a hand-made trace"], events=[
    Phase("load"), Alloc("t1", 1000, 0, "param", "fc.weight"),
    Step(1, 4), Phase("forward"), Alloc("t2", 100, 0, "input", "input_ids"),
    Alloc("t3", 3000, 0, "activation", "fc"), Alloc("t4", 512, 1, "temp", "-"), Free("t4"),
    Phase("backward"), Alloc("t5", 2000, 0, "grad", "fc.weight"), Free("t3"),
    Phase("optimizer"), Free("t2"), Mark("end")])
with tempfile.TemporaryDirectory() as d:
    for name in ("t.trace", "t.trace.gz"):
        path = os.path.join(d, name)
        write_trace(tr, path)
        back = read_trace(path)
        eq((back.header, back.events), (tr.header, tr.events), f"{name}: written and read back unchanged")
    with open(os.path.join(d, "t.trace")) as f:
        text = f.read()
    eq(text.splitlines()[:4], ["# a hand-made trace", "phase load", "alloc t1 1000 s0 param fc.weight", "step 1 samples 4"],
       "the text form")
    write_trace(tr, os.path.join(d, "a.gz"))
    write_trace(tr, os.path.join(d, "b.gz"))
    with open(os.path.join(d, "a.gz"), "rb") as a, open(os.path.join(d, "b.gz"), "rb") as b:
        ok(a.read() == b.read(), "gzip output is reproducible byte for byte (no timestamp)")
    bad = Trace(events=[Alloc("t1", 10, 0, "weights", "-")])
    raises(ValueError, lambda: write_trace(bad, os.path.join(d, "bad.trace")), "an unknown category is refused", "weights")
    ok(not os.path.exists(os.path.join(d, "bad.trace")), "nothing is written for a bad trace")

eq(rounded(1), 512, "a 1-byte request takes 512 bytes")
eq(rounded(513), 1024, "513 bytes round up to 1024")
s = summarize(tr)
# rounded: t1 1024, t2 512, t3 3072, t4 512, t5 2048
eq(s["forward_end"], 1024 + 512 + 3072, "end of forward: param, input, activation")
eq(s["peak_rounded"], 1024 + 512 + 3072 + 2048, "peak in backward, before the activation is freed")
eq(s["phase_peaks"], {"load": 1024, "forward": 1024 + 512 + 3072 + 512, "backward": 6656, "optimizer": 3584},
   "per-phase peaks")
eq(s["category_at_peak"], {"param": 1024, "input": 512, "activation": 3072, "grad": 2048}, "categories at the peak")
eq(parse_trace("alloc a 10\nalloc b 20 s2\nfree a\nempty_cache\nstep 3\n").events,
   [Alloc("a", 10, 0, "other", "-"), Alloc("b", 20, 2, "other", "-"), Free("a"),
    __import__("oomlab_recorder.trace").trace.EmptyCache(), Step(3, 0)],
   "optional fields: stream 0, category other, tag -")

for text, where, what in [
        ("alloc t1 12x", "x.trace:1:10", "not a non-negative integer"),
        ("alloc t1 -5", "x.trace:1:10", "not a non-negative integer"),
        ("phase load\n  alloc t1 10 s0 weights", "x.trace:2:18", "unknown category"),
        ("alloc t1 10\nalloc t1 10", "x.trace:2:7", "already allocated"),
        ("free t9", "x.trace:1:6", "not allocated"),
        ("alloc t1 10\nfree t1\nfree t1", "x.trace:3:6", "not allocated"),
        ("step 0", "x.trace:1:1", "N from 1"),
        ("step 1 sample 3", "x.trace:1:1", "N from 1"),
        ("phase", "x.trace:1:1", "wrong number"),
        ("alloc t1 10 param a b", "x.trace:1:21", "after its tag"),
        ("alloc t1 10 s0 param a b", "x.trace:1:1", "alloc takes"),
        ("allocate t1 10", "x.trace:1:1", "unknown verb")]:
    raises(TraceError, lambda: parse_trace(text, "x.trace"), f"{text!r}: error at {where}", f"{where}: ")
    raises(TraceError, lambda: parse_trace(text, "x.trace"), f"{text!r}: says {what}", what)
done()
