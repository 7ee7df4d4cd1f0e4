"""recorder_tiny.t: the exact allocation stream of a tiny MLP's training step, worked out by hand.

Model: fc1 = Linear(256, 512), relu, Dropout(0.1), fc2 = Linear(512, 10); batch x of (8, 256) fp32;
loss = out.sum(); AdamW foreach; 2 steps; a 1 MiB cuBLAS workspace.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from tap import done, eq, ok
import oomlab_recorder as rec
from oomlab_recorder.trace import Alloc, Free, Phase, Step


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(256, 512)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


B, I, H, O, F4 = 8, 256, 512, 10, 4
with torch.device("meta"):
    model = MLP()
r = rec.record(model, lambda: (torch.randn(B, I),), loss_fn=lambda out, batch: out.sum(), steps=2,
               cublas_workspace=1 << 20)
ev = r.trace.events
ids = {}


def show(e):
    if isinstance(e, Alloc):
        ids[e.id] = len(ids) + 1
        return ("alloc", ids[e.id], e.nbytes, e.category, e.tag)
    if isinstance(e, Free):
        return ("free", ids[e.id])
    if isinstance(e, Phase):
        return ("phase", e.name)
    if isinstance(e, Step):
        return ("step", e.number, e.samples)
    return (type(e).__name__,)


got = [show(e) for e in ev]
W1, b1, W2, b2 = H * I * F4, H * F4, O * H * F4, O * F4
act = B * H * F4
want_step1 = [
    ("phase", "load"),
    # nn.Module._apply order: fc1's weight and bias, then fc2's (Dropout has none)
    ("alloc", 1, W1, "param", "fc1.weight"), ("alloc", 2, b1, "param", "fc1.bias"),
    ("alloc", 3, W2, "param", "fc2.weight"), ("alloc", 4, b2, "param", "fc2.bias"),
    ("step", 1, B), ("phase", "forward"),
    ("alloc", 5, B * I * F4, "input", "input.0"),
    ("alloc", 6, act, "activation", "fc1"),                 # addmm output
    ("alloc", 7, 1 << 20, "workspace", "cublas_workspace"),  # after the first GEMM's output
    ("alloc", 8, act, "activation", "MLP"),                 # relu, called in the root's forward
    ("free", 6),                                            # relu saves its output, not its input
    ("alloc", 9, act, "activation", "drop"),                # native_dropout: output ...
    ("alloc", 10, B * H, "activation", "drop"),             # ... and a 1-byte bool mask (CUDA's choice)
    ("alloc", 11, B * O * F4, "activation", "fc2"),
    ("alloc", 12, F4, "activation", "loss"),                # out.sum(), in the loss scope
    ("free", 11),                                           # sum's backward needs only the shape
    ("phase", "backward"),
    ("alloc", 13, F4, "temp", "-"),                         # the loss's grad (ones), before any node runs
    ("alloc", 14, act, "temp", "fc2"),                      # d(input of fc2) = grad @ W2
    ("alloc", 15, W2, "grad", "fc2.weight"), ("alloc", 16, b2, "grad", "fc2.bias"),
    ("free", 9),                                            # fc2's saved input goes with its node
    ("alloc", 17, act, "temp", "drop"),                     # grad * mask * 1/(1-p)
    ("free", 14), ("free", 10),
    ("alloc", 18, act, "temp", "MLP"),                      # threshold_backward
    ("free", 17), ("free", 8),
    ("alloc", 19, W1, "grad", "fc1.weight"), ("alloc", 20, b1, "grad", "fc1.bias"),  # no grad for x
    ("free", 18), ("free", 13), ("free", 12),
    ("phase", "optimizer"),
    # AdamW's lazy state: exp_avg and exp_avg_sq per parameter (its step count is a CPU tensor)
    ("alloc", 21, W1, "optimizer_state", "fc1.weight"), ("alloc", 22, W1, "optimizer_state", "fc1.weight"),
    ("alloc", 23, b1, "optimizer_state", "fc1.bias"), ("alloc", 24, b1, "optimizer_state", "fc1.bias"),
    ("alloc", 25, W2, "optimizer_state", "fc2.weight"), ("alloc", 26, W2, "optimizer_state", "fc2.weight"),
    ("alloc", 27, b2, "optimizer_state", "fc2.bias"), ("alloc", 28, b2, "optimizer_state", "fc2.bias"),
    # foreach: one sqrt(exp_avg_sq) list, the rest in place; the list dies from its end
    ("alloc", 29, W1, "temp", "-"), ("alloc", 30, b1, "temp", "-"),
    ("alloc", 31, W2, "temp", "-"), ("alloc", 32, b2, "temp", "-"),
    ("free", 32), ("free", 31), ("free", 30), ("free", 29),
    ("phase", "zero_grad"),
    ("free", 19), ("free", 20), ("free", 15), ("free", 16),  # set_to_none, in parameter order
    ("free", 5),                                             # the batch is dropped at the end of the step
    ("step", 2, B),
]
eq(got[:len(want_step1)], want_step1, "step 1: every allocation and free, in order, with category and tag")
step2 = got[len(want_step1):]
eq(sum(1 for e in step2 if e[0] == "alloc" and e[3] == "optimizer_state"), 0,
   "step 2 allocates no optimizer state")
eq(sum(1 for e in step2 if e[0] == "alloc" and e[3] == "workspace"), 0, "the workspace is allocated once")
eq(got[-1], ("Mark",), "the trace ends with a mark")

params = W1 + b1 + W2 + b2
s = r.summary
# live at the end of forward 1: params, input, workspace, relu out, dropout out + mask, loss (512-rounded)
rnd = rec.trace.rounded
eq(s["forward_end"], sum(map(rnd, (W1, b1, W2, b2, B * I * F4, 1 << 20, act, act, B * H, F4))),
   "end of forward, in 512-rounded bytes")
# the peak is in the optimizer step: params, 2 states, grads, the sqrt list, the batch, the workspace
eq(s["peak_rounded"], 5 * sum(map(rnd, (W1, b1, W2, b2))) + rnd(B * I * F4) + (1 << 20), "peak")
eq(r.param_count, params // F4, "parameter count")
ok(set(s["phase_peaks"]) == {"load", "forward", "backward", "optimizer", "zero_grad"}, "phases")

# dropout as CUDA runs it (native_dropout): the saved mask is 1 byte per element; the meta device
# left alone would save a noise tensor of the input dtype (4 bytes per element)
with torch.device("meta"):
    m2 = MLP()
r2 = rec.record(m2, lambda: (torch.randn(B, I),), loss_fn=lambda out, batch: out.sum(), steps=1)
masks = [e.nbytes for e in r2.trace.events if isinstance(e, Alloc) and e.tag == "drop" and e.category == "activation"]
eq(masks, [act, B * H], "dropout saves a bool mask of B*H bytes")

# in eval mode dropout is the identity: no mask
r3 = rec.record_inference(MLP().to("meta"), lambda: (torch.randn(B, I),))
eq([e.tag for e in r3.trace.events if isinstance(e, Alloc) and e.tag == "drop"], [], "no dropout in eval")
outs = [e.nbytes for e in r3.trace.events if isinstance(e, Alloc) and e.category == "output"]
eq(outs, [B * O * F4], "inference: the model's output is category output")
eq([type(e).__name__ for e in r3.trace.events if not isinstance(e, (Alloc, Free))],
   ["Phase", "Mark", "Phase", "Mark"], "inference: load, mark batch1, eval, mark end")
done()
