"""cli.py: `python -m oomlab_recorder MODEL ...` -- record a transformers model's training step (by
name, or from a config.json) as an oomlab trace. Needs transformers installed."""
import argparse
import json
import re
import sys

import torch

from . import hf
from .cuda_choices import SDPA_BACKENDS
from .record import answer_padded, answer_unpadded, record
from .trace import summarize

UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}


def size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (bytes, or with B, KiB, MiB, GiB, KB, MB, GB)")
    return int(m.group(1)) * UNITS[m.group(2).lower()]


def sm_version(text):
    m = re.fullmatch(r"(?:sm_?)?(\d+)(\d)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a compute capability such as sm_90 or 86")
    return int(m.group(1)), int(m.group(2))


def parser():
    ap = argparse.ArgumentParser(prog="python -m oomlab_recorder", description=__doc__)
    ap.add_argument("model", nargs="?", help=f"one of {', '.join(hf.MODELS)} (or --config)")
    ap.add_argument("--config", help="a transformers config.json (or its directory) instead of a name")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--target-len", type=int, default=0, help="decoder tokens (seq2seq; default --seq)")
    ap.add_argument("--dtype", default="fp32", choices=list(hf.DTYPES),
                    help="model.to(dtype) before training (pure 16-bit: AdamW state in that dtype too)")
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"], help="attn_implementation")
    ap.add_argument("--sdpa", default="auto", choices=SDPA_BACKENDS,
                    help="SDPA backend: auto (as CUDA picks on --sm), flash, efficient, math, or meta's own (math)")
    ap.add_argument("--sm", type=sm_version, default=(9, 0), help="compute capability the choices follow (sm_90)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    ap.add_argument("--no-foreach", action="store_true", help="the for-loop optimizer instead of foreach")
    ap.add_argument("--attention-mask", default="none", choices=["none", "ones", "padded"],
                    help="pass an all-ones attention_mask: ones (transformers finds no padding) or padded "
                         "(it is told the batch has padding, and builds the 4D mask)")
    ap.add_argument("--no-cache", dest="use_cache", action="store_const", const=False, default=None,
                    help="call with use_cache=False (default: the config decides; GPT-2, T5 and Llama build a "
                         "DynamicCache even in training)")
    ap.add_argument("--cublas-workspace", type=size, default=0,
                    help="cuBLAS workspace allocated after the first GEMM (sm_90+: 32MiB); default none")
    ap.add_argument("-o", "--out", required=True, help="trace file (.gz: gzip-compressed)")
    ap.add_argument("--summary", help="write the figures as JSON here")
    ap.add_argument("--memtracker", action="store_true",
                    help="also run torch's MemTracker over the same steps and print its peak")
    return ap


def main(argv=None):
    a = parser().parse_args(argv)
    if not a.model and not a.config:
        parser().error("give a MODEL name or --config")
    try:
        kind, model, cfg, dims = hf.build(a.model, a.attn, a.config)
    except ImportError:
        print("oomlab_recorder: the CLI needs transformers (pip install 'oomlab-recorder[transformers]')",
              file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"oomlab_recorder: {e}", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    make = hf.batch_maker(kind, cfg, a.batch, a.seq, a.target_len, a.attention_mask != "none", a.use_cache)
    opt_cls = torch.optim.AdamW if a.optimizer == "adamw" else torch.optim.SGD
    opt_kw = {"lr": 1e-3, "foreach": not a.no_foreach}
    opt_kw.update({"weight_decay": 0.01} if a.optimizer == "adamw" else {"momentum": 0.9})
    answer = answer_padded if a.attention_mask == "padded" else answer_unpadded
    header = [f"python -m oomlab_recorder {' '.join(sys.argv[1:] if argv is None else argv)}",
              f"model {a.model or a.config}: {dims}",
              f"job: batch {a.batch}, seq {a.seq}" + (f", target {a.target_len}" if a.target_len else "")
              + f", {a.dtype}, attn {cfg._attn_implementation} (SDPA {a.sdpa} on sm_{a.sm[0]}{a.sm[1]}), "
              f"{a.optimizer} {'for-loop' if a.no_foreach else 'foreach'}, {a.steps} steps, dropout as the config, "
              f"attention mask {a.attention_mask}, use_cache {'config' if a.use_cache is None else a.use_cache}, "
              f"cuBLAS workspace {a.cublas_workspace} B"]
    rec = record(model, make, hf.loss_fn(kind), lambda ps: opt_cls(ps, **opt_kw), a.steps,
                 dtype=hf.DTYPES[a.dtype], sdpa=a.sdpa, sm=a.sm, cublas_workspace=a.cublas_workspace,
                 answer_item=answer, header=header, forward=hf.forward_fn(kind))
    rec.write(a.out)
    out = {"params": rec.param_count, "sdpa_calls": rec.sdpa_calls, "item_answers": rec.item_answers}
    out.update(summarize(rec.trace))
    if a.memtracker:
        from .check import memtracker_peak
        build = lambda: hf.build(a.model, a.attn, a.config)[1]   # noqa: E731
        out["memtracker_peak"] = memtracker_peak(
            build, make, hf.loss_fn(kind), lambda ps: opt_cls(ps, **opt_kw), a.steps,
            dtype=hf.DTYPES[a.dtype], sdpa=a.sdpa, sm=a.sm, answer_item=answer, forward=hf.forward_fn(kind))
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps({k: v for k, v in out.items() if k != "step_phase_peaks"}))
    return 0
