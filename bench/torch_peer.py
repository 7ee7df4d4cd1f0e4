#!/usr/bin/env python3
"""torch_peer.py: oomlab's host kernels beside PyTorch CPU at the same shapes and threads (issue 18).

Runs build/bench/host_kernels_bench pinned to 1 and then 2 cores (its kernels use every core they may), times
the same operations in torch with torch.set_num_threads(1 or 2) on the same cores, and prints one table of
times and ratios (oomlab / torch: below 1 is faster). Both sides report the fastest of their repetitions.
`make bench` runs it when torch can be imported; usage: torch_peer.py [BENCH_BINARY].
"""
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

BENCH = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "build", "bench",
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

    def adamw():
        p = torch.nn.Parameter(rnd(10_000_000))
        p.grad = rnd(10_000_000)
        opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01, fused=True)
        opt.step()  # creates the state
        return opt.step

    return {"BM_HostBiasGrad": bias_grad, "BM_HostSoftmax": softmax, "BM_HostLayerNorm": layernorm,
            "BM_HostFlashFwd": flash, "BM_HostConv2d": conv, "BM_HostAdamWFused": adamw} | backward_cases(rnd)


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


def oomlab_times(cores):
    out = subprocess.run(["taskset", "-c", ",".join(map(str, cores)), BENCH, "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    times = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "min":
            times[b["run_name"].split("/")[0]] = b["real_time"]  # ms
    return times


def main():
    if not os.access(BENCH, os.X_OK):
        sys.exit(f"torch_peer.py: {BENCH} is not built (make bench builds it)")
    ncores = len(os.sched_getaffinity(0))
    cases = torch_cases()
    print(f"host kernels against PyTorch {torch.__version__} CPU (fastest of 3; ratio = oomlab / torch)")
    print(f"  {'kernel':20s} {'threads':>7s} {'oomlab ms':>10s} {'torch ms':>9s} {'ratio':>6s}")
    for threads in (1, 2):
        if threads > ncores:
            continue
        cores = sorted(os.sched_getaffinity(0))[:threads]
        ours = oomlab_times(cores)
        saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cores)
        torch.set_num_threads(threads)
        try:
            for name, make in cases.items():
                theirs = torch_time(make)
                mine = ours.get(name)
                ratio = f"{mine / theirs:6.2f}" if mine else "     -"
                print(f"  {name[7:]:20s} {threads:7d} {mine if mine else float('nan'):10.2f} {theirs:9.2f} {ratio}")
        finally:
            os.sched_setaffinity(0, saved)


if __name__ == "__main__":
    main()
