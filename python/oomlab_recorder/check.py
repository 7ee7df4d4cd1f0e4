"""check.py: cross-check a recording with torch's own MemTracker
(torch.distributed._tools.mem_tracker), run over the same steps of a fresh copy of the model. Its
peak counts every storage it sees, unrounded, with no cuBLAS workspace: compare it with a recording
made without workspace, on summary()["peak_requested"]."""
import torch

from .cuda_choices import CudaChoices
from .record import _call, _loss_of, _to_meta
from .storages import StorageLedger, StorageWatcher


def memtracker_peak(build, make_batch, loss_fn, optimizer, steps, *, dtype=None, sdpa="auto", sm=(9, 0),
                    answer_item=None, forward=None):
    """MemTracker's peak total (bytes) on meta for `steps` training steps of build()."""
    from torch.distributed._tools.mem_tracker import MemTracker

    model = _to_meta(build(), dtype).train()
    opt = optimizer([p for p in model.parameters() if p.requires_grad])
    mt = MemTracker()
    mt.track_external(model, opt)
    # a watcher of its own answers .item() on meta; its ledger is thrown away
    items = StorageWatcher(StorageLedger("meta"), lambda: "-", 0, answer_item)
    with CudaChoices(sdpa, sm), mt, items:
        for _ in range(steps):
            mt.reset_mod_stats()
            with torch.device("meta"):
                batch = make_batch()
            out = forward(model, batch) if forward else _call(model, batch)
            loss = _loss_of(out) if loss_fn is None else loss_fn(out, batch)
            del out
            loss.backward()
            del loss
            opt.step()
            opt.zero_grad(set_to_none=True)
            del batch
    peak = mt.get_tracker_snapshot("peak")
    return sum(d["Total"] for dev, d in peak.items() if str(dev) == "meta")
