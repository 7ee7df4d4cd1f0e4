"""trace.py: the oomlab text trace -- its events, how they are written and read back, and the figures
(peak allocated, per-phase peaks, end of forward) computed from them.

The format, one event per line, `#` starts a comment:

    phase NAME                                  load | forward | backward | optimizer | zero_grad | eval ...
    step N [samples M]                          a training step begins (N from 1)
    alloc ID BYTES [sSTREAM] [CATEGORY [TAG]]   BYTES an integer; CATEGORY one of CATEGORIES; TAG no spaces
    free ID
    empty_cache
    mark LABEL

This module needs no torch: the tests and the conformance tools read traces with it.
"""
import gzip
import re
from dataclasses import dataclass, field

CATEGORIES = ("param", "grad", "optimizer_state", "ema", "activation", "temp", "workspace", "input",
              "output", "other")

# PyTorch's CUDA caching allocator rounds every request up to a multiple of 512 bytes
# (c10/cuda/CUDACachingAllocator.cpp, round_size: kMinBlockSize = 512); "allocated" figures are in
# rounded bytes, as torch.cuda.memory_allocated() reports them.
MIN_BLOCK = 512


def rounded(nbytes):
    return MIN_BLOCK if nbytes < MIN_BLOCK else (nbytes + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK


class TraceError(ValueError):
    """A malformed trace line; the message names file:line:column."""


@dataclass
class Alloc:
    id: str
    nbytes: int
    stream: int = 0
    category: str = "other"
    tag: str = "-"


@dataclass
class Free:
    id: str


@dataclass
class Phase:
    name: str


@dataclass
class Step:
    number: int
    samples: int = 0


@dataclass
class Mark:
    label: str


@dataclass
class EmptyCache:
    pass


@dataclass
class Trace:
    header: list = field(default_factory=list)    # comment lines, without the leading "# "
    events: list = field(default_factory=list)

    def allocs(self):
        return [e for e in self.events if isinstance(e, Alloc)]


def _word_ok(w):
    return bool(w) and not any(c.isspace() for c in w) and "#" not in w


def format_event(e):
    if isinstance(e, Alloc):
        return f"alloc {e.id} {e.nbytes} s{e.stream} {e.category} {e.tag}"
    if isinstance(e, Free):
        return f"free {e.id}"
    if isinstance(e, Phase):
        return f"phase {e.name}"
    if isinstance(e, Step):
        return f"step {e.number} samples {e.samples}" if e.samples else f"step {e.number}"
    if isinstance(e, Mark):
        return f"mark {e.label}"
    if isinstance(e, EmptyCache):
        return "empty_cache"
    raise TypeError(f"not a trace event: {e!r}")


def _check_event(e):
    if isinstance(e, Alloc):
        if e.category not in CATEGORIES:
            raise ValueError(f"alloc {e.id}: unknown category {e.category!r}")
        if e.nbytes < 0 or not _word_ok(e.id) or not _word_ok(e.tag):
            raise ValueError(f"alloc {e.id!r} {e.nbytes} {e.tag!r}: bad id, size or tag")
    for attr in ("id", "name", "label"):
        v = getattr(e, attr, None)
        if v is not None and not _word_ok(v):
            raise ValueError(f"{type(e).__name__.lower()} {v!r}: words may not contain spaces or '#'")


def write_trace(trace, path):
    """Write the trace to path (gzip-compressed when it ends in .gz). The text is built and checked
    in full before the file is opened, so a bad event leaves no half-written file."""
    lines = [f"# {h}" if h else "#" for h in trace.header]
    for e in trace.events:
        _check_event(e)
        lines.append(format_event(e))
    text = "\n".join(lines) + "\n"
    if str(path).endswith(".gz"):
        # mtime=0: the same trace gives the same bytes, so re-recording shows no spurious diff
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(text.encode())
    else:
        with open(path, "w") as f:
            f.write(text)


def parse_trace(text, name="<trace>"):
    """Parse trace text; a bad line raises TraceError naming name:line:column."""
    tr = Trace()
    live = set()
    seen = set()
    for lineno, raw in enumerate(text.splitlines(), 1):
        body, _, comment = raw.partition("#")
        if not body.strip():
            if comment and not tr.events:
                tr.header.append(comment[1:] if comment.startswith(" ") else comment)
            continue
        tokens = list(re.finditer(r"\S+", body))
        words = [m.group() for m in tokens]

        def fail(msg, word=0):
            raise TraceError(f"{name}:{lineno}:{tokens[word].start() + 1}: {msg}")

        verb, args = words[0], words[1:]
        if verb == "alloc":
            if not 2 <= len(args) <= 5:
                fail("alloc takes ID BYTES [sSTREAM] [CATEGORY [TAG]]")
            if not re.fullmatch(r"\d+", args[1]):
                fail(f"alloc size {args[1]!r} is not a non-negative integer", 2)
            rest = args[2:]
            stream = 0
            if rest and re.fullmatch(r"s\d+", rest[0]):
                stream = int(rest[0][1:])
                rest = rest[1:]
            cat = rest[0] if rest else "other"
            if cat not in CATEGORIES:
                fail(f"unknown category {cat!r}", len(words) - len(rest))
            tag = rest[1] if len(rest) > 1 else "-"
            if len(rest) > 2:
                fail("alloc has words after its tag", len(words) - 1)
            if args[0] in seen:
                fail(f"alloc of id {args[0]!r} that an earlier line already allocated", 1)
            seen.add(args[0])
            live.add(args[0])
            tr.events.append(Alloc(args[0], int(args[1]), stream, cat, tag))
        elif verb == "free":
            if len(args) != 1:
                fail("free takes one ID")
            if args[0] not in live:
                fail(f"free of id {args[0]!r} that is not allocated", 1)
            live.discard(args[0])
            tr.events.append(Free(args[0]))
        elif verb == "phase" and len(args) == 1:
            tr.events.append(Phase(args[0]))
        elif verb == "step":
            if not (len(args) in (1, 3) and args[0].isdigit() and int(args[0]) >= 1
                    and (len(args) == 1 or (args[1] == "samples" and args[2].isdigit()))):
                fail("step takes N [samples M], N from 1")
            tr.events.append(Step(int(args[0]), int(args[2]) if len(args) == 3 else 0))
        elif verb == "mark" and len(args) == 1:
            tr.events.append(Mark(args[0]))
        elif verb == "empty_cache" and not args:
            tr.events.append(EmptyCache())
        elif verb in ("phase", "mark", "empty_cache"):
            fail(f"{verb}: wrong number of words")
        else:
            fail(f"unknown verb {verb!r}")
    return tr


def read_trace(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return parse_trace(f.read(), str(path))


def summarize(trace):
    """Figures of a trace, in bytes rounded to 512 per allocation: peak (whole trace), live at the
    end, end of the first forward, and per phase name the largest live total seen while that phase
    ran (over every step), plus per step and phase. (The allocator's own allocated_bytes can be a
    little higher: a block it does not split is counted whole; `oomlab replay` gives that figure.)"""
    sizes = {}
    live = live_req = peak = peak_req = 0
    phase, step = "-", 0
    phase_peak, step_phase_peak = {}, {}
    forward_end = None
    in_first_forward = False
    n_alloc = n_free = 0
    by_cat_at_peak, by_cat = None, {}

    def bump():
        phase_peak[phase] = max(phase_peak.get(phase, 0), live)
        key = f"step{step}.{phase}" if step else phase
        step_phase_peak[key] = max(step_phase_peak.get(key, 0), live)

    for e in trace.events:
        if isinstance(e, Alloc):
            r = rounded(e.nbytes)
            sizes[e.id] = (r, e.nbytes, e.category)
            live += r
            live_req += e.nbytes
            by_cat[e.category] = by_cat.get(e.category, 0) + r
            n_alloc += 1
            if live > peak:
                peak = live
                by_cat_at_peak = dict(by_cat)
            peak_req = max(peak_req, live_req)
            bump()
        elif isinstance(e, Free):
            r, req, cat = sizes.pop(e.id)
            live -= r
            live_req -= req
            by_cat[cat] -= r
            n_free += 1
        elif isinstance(e, (Phase, Step)):
            if in_first_forward and forward_end is None:
                forward_end = live
            in_first_forward = False
            if isinstance(e, Step):
                step = e.number
            else:
                phase = e.name
                in_first_forward = e.name == "forward" and forward_end is None
                bump()
    if in_first_forward and forward_end is None:
        forward_end = live
    return {"peak_rounded": peak, "peak_requested": peak_req, "live_at_end": live,
            "forward_end": forward_end, "phase_peaks": phase_peak, "step_phase_peaks": step_phase_peak,
            "allocs": n_alloc, "frees": n_free,
            "category_at_peak": {k: v for k, v in (by_cat_at_peak or {}).items() if v}}
