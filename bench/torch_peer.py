#!/usr/bin/env python3
"""torch_peer.py: oomlab's host kernels beside PyTorch CPU at the same shapes and threads (issue 18).

Runs each benchmark of build/bench/host_kernels_bench pinned to 1 and then 2 cores (its kernels use every core they
may), then the same operation in torch with torch.set_num_threads(1 or 2) on the same cores, the pair ROUNDS times
in turn so that a neighbour's burst of load on a shared machine slows one run of each rather than every run of one,
and prints one table of times and ratios (oomlab / torch: below 1 is faster), each side the fastest it ran. The
whole training step (BM_HostTrainStep) is compared with TinyGPT's, the same model built in torch.
`make bench` runs it when torch can be imported; usage: torch_peer.py [BENCH_BINARY].
"""
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")  # BM_HostTrainStep reads scenarios/host/
BENCH = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(TOP, "build", "bench",
                                                             "host_kernels_bench")


def torch_cases():
    """name -> (setup, run): the same shapes as host_kernels_bench.cc."""
    g = torch.Generator().manual_seed(7)

    def rnd(*shape):
        return torch.rand(*shape, generator=g) * 0.5 + 0.01

    def bias_grad():
        dy = rnd(8192, 768)
        return lambda: dy.sum(0)

    def softmax():
        x = rnd(32 * 12 * 256, 256)
        return lambda: torch.softmax(x, -1)

    def layernorm():
        x, w, b = rnd(8192, 768), rnd(768), rnd(768)
        return lambda: F.layer_norm(x, (768,), w, b, 1e-5)

    def flash():
        q, k, v = rnd(8, 12, 256, 64), rnd(8, 12, 256, 64), rnd(8, 12, 256, 64)
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.125)

    def conv():
        x, w = rnd(8, 64, 56, 56), rnd(64, 64, 3, 3)
        return lambda: F.conv2d(x, w, stride=1, padding=1)

    def gelu():
        x = rnd(8 * 256, 1024)
        return lambda: F.gelu(x)

    def gelu_bwd():
        x, dy = rnd(8 * 256, 1024), rnd(8 * 256, 1024)
        return lambda: torch.ops.aten.gelu_backward(dy, x)  # what autograd runs for F.gelu's backward

    def adamw():
        p = torch.nn.Parameter(rnd(10_000_000))
        p.grad = rnd(10_000_000)
        opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01, fused=True)
        opt.step()  # creates the state
        return opt.step

    return {"BM_HostBiasGrad": bias_grad, "BM_HostSoftmax": softmax, "BM_HostLayerNorm": layernorm,
            "BM_HostFlashFwd": flash, "BM_HostConv2d": conv, "BM_HostGeluFwd": gelu, "BM_HostGeluBwd": gelu_bwd,
            "BM_HostAdamWFused": adamw} | backward_cases(rnd)


def backward_cases(rnd):
    """kernattn's entries: SDPA's backward from its own output (torch's CPU flash backward; grads of q, k, v),
    eager attention as transformers' eager_attention_forward computes it (matmul, causal mask added, softmax,
    matmul) and its backward, conv2d's gradient to the input and to the filter apart."""

    def eager(q, k, v):
        mask = torch.full((256, 256), float("-inf")).triu(1)
        return torch.softmax(q @ k.transpose(-1, -2) * 0.125 + mask, -1) @ v

    def attn_fwd():
        q, k, v = (rnd(8, 12, 256, 64) for _ in range(3))
        return lambda: eager(q, k, v)

    def backward_of(forward):
        q, k, v = (rnd(8, 12, 256, 64).requires_grad_() for _ in range(3))
        with torch.enable_grad():
            out = forward(q, k, v)
        dout = rnd(8, 12, 256, 64)
        return lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.125)

    def conv_bwd(mask):
        x, w, dy = rnd(8, 64, 56, 56), rnd(64, 64, 3, 3), rnd(8, 64, 56, 56)
        return lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                                           mask)

    return {"BM_HostFlashBwd": lambda: backward_of(sdpa), "BM_HostAttnEagerFwd": attn_fwd,
            "BM_HostAttnEagerBwd": lambda: backward_of(eager),
            "BM_HostConv2dBwdData": lambda: conv_bwd([True, False, False]),
            "BM_HostConv2dBwdFilter": lambda: conv_bwd([False, True, False])}


class TinyGPT(torch.nn.Module):
    """The tiny-transformer preset as oomlab's op program runs it (harness/workload/presets.c: GPT-2 style, 4 layers
    of width 256, 4 heads, FFN 1024, exact GELU, 512 positions, dropout 0.1 on the embeddings and after each
    residual branch, none on the attention probabilities, fused causal attention, LM head tied to the
    embedding)."""

    def __init__(self, vocab=2048, width=256, layers=4, heads=4, ffn=1024, positions=512, p=0.1):
        super().__init__()
        nn = torch.nn
        self.heads = heads
        self.wte, self.wpe, self.drop = nn.Embedding(vocab, width), nn.Embedding(positions, width), nn.Dropout(p)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({
                "ln_1": nn.LayerNorm(width), "c_attn": nn.Linear(width, 3 * width), "attn_proj": nn.Linear(width, width),
                "ln_2": nn.LayerNorm(width), "c_fc": nn.Linear(width, ffn), "mlp_proj": nn.Linear(ffn, width),
                "drop_1": nn.Dropout(p), "drop_2": nn.Dropout(p), "act": nn.GELU()}))
        self.ln_f = nn.LayerNorm(width)

    def forward(self, ids):
        B, T = ids.shape
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(T)))
        for b in self.blocks:
            q, k, v = b["c_attn"](b["ln_1"](x)).view(B, T, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1)
            x = x + b["drop_1"](b["attn_proj"](a))
            x = x + b["drop_2"](b["mlp_proj"](b["act"](b["c_fc"](b["ln_2"](x)))))
        return self.ln_f(x) @ self.wte.weight.t()


def torch_step_time(steps=5, batch=8, seq=256, vocab=2048):
    """Fastest of `steps` training steps (forward, cross-entropy, backward, AdamW as torch's default on CPU,
    zero_grad(set_to_none=True)) of TinyGPT on batch x seq random tokens, after one warm-up step; in ms."""
    torch.manual_seed(0)
    model = TinyGPT(vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01)
    best = float("inf")
    for i in range(steps + 1):
        ids, labels = torch.randint(0, vocab, (batch, seq)), torch.randint(0, vocab, (batch * seq,))
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(ids).view(-1, vocab), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:
            best = min(best, time.perf_counter() - t0)
    return best * 1e3


def torch_time(make, min_time=0.2, reps=3):
    fn = make()
    fn()
    best = float("inf")
    with torch.no_grad():
        for _ in range(reps):
            n, t0 = 0, time.perf_counter()
            while True:
                fn()
                n += 1
                el = time.perf_counter() - t0
                if el >= min_time:
                    break
            best = min(best, el / n)
    return best * 1e3


ROUNDS = 2  # each pair (oomlab's binary, then torch) runs this many times, interleaved; the fastest counts


def oomlab_times(cores, name):
    """The fastest repetition of benchmark `name` of the oomlab binary pinned to `cores`, in ms (None if absent)."""
    out = subprocess.run(["taskset", "-c", ",".join(map(str, cores)), BENCH, "--benchmark_format=json",
                          f"--benchmark_filter=^{name}/"], check=True, capture_output=True, text=True, cwd=TOP).stdout
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "min":
            return b["real_time"]  # ms
    return None


def main():
    if not os.access(BENCH, os.X_OK):
        sys.exit(f"torch_peer.py: {BENCH} is not built (make bench builds it)")
    ncores = len(os.sched_getaffinity(0))
    cases = {name: (lambda make=make: torch_time(make)) for name, make in torch_cases().items()}
    cases["BM_HostTrainStep"] = torch_step_time
    print(f"host kernels against PyTorch {torch.__version__} CPU (ratio = oomlab / torch; each side the fastest of its "
          f"repetitions over {ROUNDS} interleaved rounds)")
    print(f"  {'kernel':20s} {'threads':>7s} {'oomlab ms':>10s} {'torch ms':>9s} {'ratio':>6s}")
    for threads in (1, 2):
        if threads > ncores:
            continue
        cores = sorted(os.sched_getaffinity(0))[:threads]
        saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cores)
        torch.set_num_threads(threads)
        try:
            for name, theirs_ms in cases.items():
                mine, theirs = float("inf"), float("inf")
                for _ in range(ROUNDS):
                    mine = min(mine, oomlab_times(cores, name) or float("inf"))
                    theirs = min(theirs, theirs_ms())
                ratio = f"{mine / theirs:6.2f}" if mine < float("inf") else "     -"
                print(f"  {name[7:]:20s} {threads:7d} {mine:10.2f} {theirs:9.2f} {ratio}", flush=True)
        finally:
            os.sched_setaffinity(0, saved)


if __name__ == "__main__":
    main()
