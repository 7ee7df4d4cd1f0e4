"""storages.py: which device storages come to life and die, in order, while PyTorch runs on meta.

A TorchDispatchMode sees the outputs of every aten op below autograd (forward, the autograd engine's
backward, the optimizer's foreach ops); an output whose untyped storage is not already live is an
allocation, a view of a live one is not. A storage's death is seen by weakref.finalize on its Python
storage object: since PyTorch preserves that object for as long as the C++ StorageImpl lives, the
callback fires exactly when the StorageImpl is destroyed -- the moment the CUDA caching allocator
would get the block back.

Roles (param, grad, optimizer_state, input, ...) are often known only after the allocation (a
gradient becomes a parameter's .grad when AccumulateGrad stores it), so the ledger keeps events and
lets the recorder classify live storages later; trace() turns them into trace events at the end.
"""
import weakref

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .trace import Alloc, Free, Mark, Phase, Step, Trace

# aten ops that run a cuBLAS / cuBLASLt GEMM on CUDA: the first one creates the handle's workspace
# (at::cuda::getCurrentCUDABlasHandle -> cublasSetWorkspace with a block from the caching allocator),
# after the op's output has been allocated.
GEMM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot",
                      "_addmm_activation", "_scaled_mm", "_int_mm"})


class StorageLedger:
    """The ordered record of allocations and frees of one device type, with each allocation's
    category (set from the phase it happened in, refined later by classify) and module tag."""

    def __init__(self, device_type="meta"):
        self.device_type = device_type
        self.events = []            # ["alloc", sid, nbytes, category, tag] | ("free", sid) | Phase/Step/Mark
        self.live = {}              # StorageImpl address -> (sid, alloc event)
        self.next_sid = 1
        self.phase_name = None
        self.default_category = "other"

    def phase(self, name, default_category):
        self.phase_name = name
        self.default_category = default_category
        self.events.append(Phase(name))

    def step(self, number, samples=0):
        self.events.append(Step(number, samples))

    def mark(self, label):
        self.events.append(Mark(label))

    def _died(self, key, sid):
        ent = self.live.get(key)
        if ent is not None and ent[0] == sid:
            del self.live[key]
            self.events.append(("free", sid))

    def see(self, t, tag):
        """Record t's storage if it is a new one on the traced device."""
        if not isinstance(t, torch.Tensor) or t.device.type != self.device_type:
            return
        s = t.untyped_storage()
        key = s._cdata
        nbytes = s.nbytes()
        if key in self.live or nbytes == 0:   # a view, or nothing the allocator would be asked for
            return
        sid = self.next_sid
        self.next_sid += 1
        ev = ["alloc", sid, nbytes, self.default_category, tag]
        self.live[key] = (sid, ev)
        weakref.finalize(s, self._died, key, sid).atexit = False
        self.events.append(ev)

    def synthetic(self, nbytes, category, tag):
        """An allocation no tensor shows (the cuBLAS workspace); never freed."""
        sid = self.next_sid
        self.next_sid += 1
        self.events.append(["alloc", sid, nbytes, category, tag])

    def classify(self, t, category, tag=None):
        """Give the live storage under t a role (and a tag); False if t holds no live traced storage."""
        if not isinstance(t, torch.Tensor) or t.device.type != self.device_type:
            return False
        ent = self.live.get(t.untyped_storage()._cdata)
        if ent is None:
            return False
        ent[1][3] = category
        if tag is not None:
            ent[1][4] = tag
        return True

    def live_bytes(self):
        return sum(ev[2] for _, ev in self.live.values())

    def trace(self, header):
        out = Trace(header=list(header))
        for e in self.events:
            if isinstance(e, list):
                out.events.append(Alloc(f"t{e[1]}", e[2], 0, e[3], e[4]))
            elif isinstance(e, tuple):
                out.events.append(Free(f"t{e[1]}"))
            else:
                out.events.append(e)
        return out


class ItemOnMeta(RuntimeError):
    pass


class StorageWatcher(TorchDispatchMode):
    """Feeds every op output to the ledger, tagged by tag_of(); adds the cuBLAS workspace after the
    first GEMM; answers `.item()` on meta tensors through answer_item (meta tensors hold no data)."""

    def __init__(self, ledger, tag_of, cublas_workspace=0, answer_item=None):
        super().__init__()
        self.ledger = ledger
        self.tag_of = tag_of
        self.cublas_workspace = cublas_workspace
        self.workspace_added = False
        self.answer_item = answer_item
        self.item_answers = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default and args[0].device.type == "meta":
            if self.answer_item is None:
                raise ItemOnMeta(f".item() on a meta {args[0].dtype} tensor of shape {tuple(args[0].shape)}: "
                                 "no data to answer with (pass answer_item= to record())")
            answer = self.answer_item(args[0])
            self.item_answers.append(answer)
            return answer
        out = func(*args, **kwargs)
        tag = self.tag_of()
        for t in pytree.tree_leaves(out):
            self.ledger.see(t, tag)
        if (self.cublas_workspace and not self.workspace_added
                and func.overloadpacket.__name__ in GEMM_OPS):
            self.workspace_added = True
            self.ledger.synthetic(self.cublas_workspace, "workspace", "cublas_workspace")
        return out
