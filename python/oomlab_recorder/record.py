"""record.py: run training steps (or inference batches) of a user's nn.Module on the meta device and
record every device storage they allocate and free, as an oomlab trace.

A training step is what a plain PyTorch loop does:

    batch = make_batch()                       # phase forward (its tensors: category input)
    loss = loss_fn(model(batch), batch)        #   (everything else: activation)
    loss.backward()                            # phase backward (temp; a parameter's .grad: grad)
    optimizer.step()                           # phase optimizer (temp; its state: optimizer_state)
    optimizer.zero_grad(set_to_none=True)      # phase zero_grad
                                               # the batch is dropped here, before the next one

Parameters and buffers are allocated first (phase load), in nn.Module._apply order; the cuBLAS
workspace, when asked for, after the first GEMM's output (category workspace, never freed).
"""
import gc
import importlib.metadata
import sys
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree

from .cuda_choices import CudaChoices
from .modules import ModuleTags, apply_order
from .storages import StorageLedger, StorageWatcher
from .trace import summarize, write_trace
from .version import __version__

PHASE_CATEGORY = {"load": "param", "forward": "activation", "eval": "activation", "backward": "temp",
                  "optimizer": "temp", "zero_grad": "temp"}


def answer_unpadded(t):
    """Answer `.item()` on a one-element meta bool tensor with True. transformers asks data questions
    with .all() (masking_utils: `padding_mask.all()` -- no padding, so no 4D mask; without a mask,
    `(packed_sequence_mask[:, -1] == 0).all()` -- no packed sequences): True is the ordinary batch."""
    if t.dtype != torch.bool or t.numel() != 1:
        raise RuntimeError(f".item() on a meta {t.dtype} tensor of shape {tuple(t.shape)}: no data to "
                           "answer with (record(answer_item=...) can answer it)")
    return True


def answer_padded(t):
    """As answer_unpadded, but the batch has padding: `padding_mask.all()` is False."""
    answer_unpadded(t)
    return False


@dataclass
class Recording:
    trace: object
    summary: dict
    param_count: int
    sdpa_calls: dict = field(default_factory=dict)
    item_answers: list = field(default_factory=list)

    def write(self, path):
        write_trace(self.trace, path)


def param_count(model):
    return sum(p.numel() for _, p in model.named_parameters())


def default_optimizer(params):
    """AdamW as PyTorch runs it on CUDA: foreach=True is what _default_to_fused_or_foreach picks for
    CUDA tensors (off CUDA it would fall back to the for-loop implementation)."""
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=True)


def _loss_of(out):
    if isinstance(out, torch.Tensor):
        return out
    if getattr(out, "loss", None) is not None:
        return out.loss
    if isinstance(out, dict) and "loss" in out:
        return out["loss"]
    raise TypeError("the model's output is not a loss (a tensor, .loss or ['loss']): pass loss_fn=")


def _call(model, batch):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def _samples(batch):
    for t in pytree.tree_leaves(batch):
        if isinstance(t, torch.Tensor) and t.dim() > 0:
            return t.size(0)
    return 0


def _input_tags(batch):
    """(tag, tensor) for each tensor of the batch: a dict's key, else input.N; a storage two keys
    share (labels = input_ids) keeps the first key."""
    if isinstance(batch, dict):
        pairs = [(str(k), v) for k, v in batch.items()]
    else:
        pairs = [(f"input.{i}", t) for i, t in enumerate(pytree.tree_leaves(batch))]
    out, seen = [], set()
    for tag, t in pairs:
        if isinstance(t, torch.Tensor) and t.untyped_storage()._cdata not in seen:
            seen.add(t.untyped_storage()._cdata)
            out.append((tag, t))
    return out


def _to_meta(model, dtype):
    if any(t.device.type != "meta" for t in list(model.parameters()) + list(model.buffers())):
        model = model.to("meta")
    if dtype is not None:
        model = model.to(dtype)
    return model


class _Session:
    """One recording: the ledger, the modes, and the bookkeeping shared by training and inference."""

    def __init__(self, model, sdpa, sm, cublas_workspace, answer_item):
        self.model = model
        self.ledger = StorageLedger("meta")
        self.tags = ModuleTags(model)
        self.choices = CudaChoices(sdpa, sm)
        self.watcher = StorageWatcher(self.ledger, self.tags.current, cublas_workspace, answer_item)
        self.names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}

    def load(self):
        self.ledger.phase("load", PHASE_CATEGORY["load"])
        for name, t in apply_order(self.model):
            self.ledger.see(t, name)
            self.ledger.classify(t, "param", name)
        gc.collect()

    def phase(self, name):
        self.ledger.phase(name, PHASE_CATEGORY.get(name, "temp"))

    def batch(self, make_batch, samples):
        with torch.device("meta"):
            batch = make_batch()
        for tag, t in _input_tags(batch):
            self.ledger.classify(t, "input", tag)
        return batch, samples or _samples(batch)

    def __enter__(self):
        self.choices.__enter__()
        self.tags.__enter__()
        self.watcher.__enter__()
        return self

    def __exit__(self, *exc):
        self.watcher.__exit__(*exc)
        self.tags.__exit__(*exc)
        self.choices.__exit__(*exc)
        return False

    def finish(self, header, kind):
        self.ledger.mark("end")
        versions = f"torch {torch.__version__}"
        if "transformers" in sys.modules:
            versions += f", transformers {importlib.metadata.version('transformers')}"
        n = param_count(self.model)
        head = [f"oomlab trace recorded by oomlab_recorder {__version__}",
                f"{versions}; {kind} of {type(self.model).__name__}, {n} params, on meta as on a CUDA "
                f"sm_{self.choices.sm[0]}{self.choices.sm[1]}"] + list(header)
        trace = self.ledger.trace(head)
        s = summarize(trace)
        trace.header.append(f"{s['allocs']} allocs, {s['frees']} frees; peak {s['peak_rounded']} B "
                            f"(512-byte rounded requests), end of forward {s['forward_end']} B, "
                            f"SDPA backends {self.choices.sdpa_calls or 'none'}")
        return Recording(trace, s, n, dict(self.choices.sdpa_calls), list(self.watcher.item_answers))


def record(model, make_batch, loss_fn=None, optimizer=default_optimizer, steps=2, *, dtype=None,
           sdpa="auto", sm=(9, 0), cublas_workspace=0, answer_item=answer_unpadded, set_to_none=True,
           samples=0, header=(), forward=None):
    """Record `steps` training steps of model on the meta device.

    make_batch(): returns the batch (a dict of tensors is passed as keyword arguments, a tuple as
      positional ones, a tensor as the one argument); called under torch.device("meta").
    loss_fn(output, batch) -> loss; None: the model's output is the loss, or has .loss / ["loss"].
    optimizer: a function of the trainable parameters returning the optimizer (default AdamW,
      foreach, as on CUDA), an optimizer already built on the model's meta parameters, or None.
    dtype: convert the model first (model.to(dtype)); a model not on meta is moved there.
    sdpa: "auto" (the backend a CUDA GPU of compute capability sm picks), "flash", "efficient",
      "math", or "meta" (leave it to the meta device: always math).
    cublas_workspace: bytes of cuBLAS workspace to allocate after the first GEMM (sm_90 and newer
      use 32 MiB, older GPUs 8 MiB + 128 KiB); 0: none.
    answer_item(tensor): the value of `.item()` on a meta tensor (default: a bool answers True).
    forward(model, batch), if given, replaces the plain call of the model with the batch.
    Returns a Recording (.trace, .summary, .write(path)).
    """
    model = _to_meta(model, dtype)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer(params) if callable(optimizer) else optimizer
    with _Session(model, sdpa, sm, cublas_workspace, answer_item) as rec:
        rec.load()
        for step in range(1, steps + 1):
            rec.ledger.step(step)
            step_event = rec.ledger.events[-1]
            rec.phase("forward")
            batch, step_event.samples = rec.batch(make_batch, samples)
            out = forward(model, batch) if forward else _call(model, batch)
            if loss_fn is None:
                loss = _loss_of(out)
            else:
                with rec.tags.scope("loss"):
                    loss = loss_fn(out, batch)
            del out
            rec.phase("backward")
            loss.backward()
            del loss
            for p in params:
                if p.grad is not None:
                    rec.ledger.classify(p.grad, "grad", rec.names.get(id(p)))
            if opt is not None:
                rec.phase("optimizer")
                opt.step()
                for p, state in opt.state.items():
                    for v in state.values():
                        rec.ledger.classify(v, "optimizer_state", rec.names.get(id(p)))
                rec.phase("zero_grad")
                opt.zero_grad(set_to_none=set_to_none)
            del batch
    return rec.finish(header, f"{steps} training step(s)")


def record_inference(model, make_batch, steps=1, *, dtype=None, sdpa="auto", sm=(9, 0),
                     cublas_workspace=0, answer_item=answer_unpadded, samples=0, header=(), forward=None):
    """Record `steps` inference batches (model.eval(), torch.no_grad()), each in a phase eval
    preceded by `mark batchN`; the model's outputs are category output. forward(model, batch), if
    given, replaces the plain call (e.g. lambda m, b: m.generate(**b))."""
    model = _to_meta(model, dtype)
    model.eval()
    with _Session(model, sdpa, sm, cublas_workspace, answer_item) as rec, torch.no_grad():
        rec.load()
        for step in range(1, steps + 1):
            rec.ledger.mark(f"batch{step}")
            rec.phase("eval")
            batch, _ = rec.batch(make_batch, samples)
            out = forward(model, batch) if forward else _call(model, batch)
            for t in pytree.tree_leaves(out):
                rec.ledger.classify(t, "output")
            del out, batch
    return rec.finish(header, f"{steps} inference batch(es)")
