"""sdpa.t: the SDPA backend a CUDA GPU picks (sdp_utils.cpp rules) and what the fused kernels save."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from tap import done, eq, raises
import oomlab_recorder as rec
from oomlab_recorder.cuda_choices import choose_sdpa_backend
from oomlab_recorder.trace import Alloc


def qkv(b=2, h=4, s=128, d=64, dtype=torch.float32, kv_heads=None, grad=False):
    with torch.device("meta"):
        q = torch.empty(b, h, s, d, dtype=dtype, requires_grad=grad)
        k = torch.empty(b, kv_heads or h, s, d, dtype=dtype, requires_grad=grad)
        v = torch.empty(b, kv_heads or h, s, d, dtype=dtype, requires_grad=grad)
    return q, k, v


bf16 = torch.bfloat16
eq(choose_sdpa_backend(*qkv(dtype=bf16)), "flash", "bf16, no mask: flash")
eq(choose_sdpa_backend(*qkv(dtype=torch.float16), is_causal=True), "flash", "fp16 causal: flash")
eq(choose_sdpa_backend(*qkv()), "efficient", "fp32: memory-efficient (flash takes 16-bit only)")
mask = torch.empty(2, 1, 128, 128, dtype=bf16, device="meta")
eq(choose_sdpa_backend(*qkv(dtype=bf16), attn_mask=mask), "efficient", "bf16 with a mask: memory-efficient")
eq(choose_sdpa_backend(*qkv(d=6)), "math", "fp32 head_dim 6 (not a multiple of 4 on sm_80+): math")
eq(choose_sdpa_backend(*qkv(d=6), sm=(7, 5)), "efficient", "fp32 head_dim 6 on sm_75 (alignment 1): efficient")
eq(choose_sdpa_backend(*qkv(dtype=bf16), sm=(7, 5)), "math", "bf16 on sm_75: neither fused kernel")
eq(choose_sdpa_backend(*qkv(dtype=bf16, d=288)), "efficient", "head_dim 288 > 256: not flash")
eq(choose_sdpa_backend(*qkv(dtype=bf16, kv_heads=2)), "math",
   "fewer kv heads without enable_gqa: both fused kernels refuse (check_batch_size_and_num_heads_dense)")
eq(choose_sdpa_backend(*qkv(dtype=bf16, kv_heads=2), enable_gqa=True), "flash", "GQA with enable_gqa: flash")
eq(choose_sdpa_backend(*qkv(dtype=bf16, d=200, grad=True), sm=(8, 9)), "efficient",
   "training with head_dim 200 on sm_89: not flash")
eq(choose_sdpa_backend(*qkv(), requested="math"), "math", "math on request")
raises(RuntimeError, lambda: choose_sdpa_backend(*qkv(), requested="flash"), "flash on request with fp32: error",
       "cannot run")
raises(ValueError, lambda: choose_sdpa_backend(*qkv(), requested="cudnn"), "unknown backend: error", "cudnn")


class Attn(nn.Module):
    def __init__(self, d=64, h=4):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d * h, 3 * d * h, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, -1).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)


def fwd_allocs(sdpa, dtype):
    with torch.device("meta"):
        m = Attn()
    r = rec.record(m, lambda: (torch.randn(2, 100, 256, dtype=dtype),), loss_fn=lambda o, b: o.sum(),
                   steps=1, sdpa=sdpa, dtype=dtype)
    return r, [e.nbytes for e in r.trace.events if isinstance(e, Alloc) and e.category == "activation"]


# b=2, s=100, h=4, d=64: qkv output 2*100*768 elements; attention output (b,h,s,d) = 51200 elements
r, a = fwd_allocs("auto", torch.float32)
eq(r.sdpa_calls, {"efficient": 1}, "fp32 records the memory-efficient kernel")
# efficient: output 51200*4 B; logsumexp (b, h, s rounded up to 32) fp32 = 2*4*128*4 B; two RNG words
eq(a[:3], [153600 * 4, 51200 * 4, 2 * 4 * 128 * 4], "efficient: qkv, output, logsumexp of (b,h,ceil32(s))")
r, a = fwd_allocs("auto", bf16)
eq(r.sdpa_calls, {"flash": 1}, "bf16 records the flash kernel")
eq(a[:3], [153600 * 2, 51200 * 2, 2 * 4 * 100 * 4], "flash: qkv, output, fp32 logsumexp of (b,h,s)")
r, a = fwd_allocs("math", torch.float32)
ok_scores = 2 * 4 * 100 * 100 * 4 in a
eq((r.sdpa_calls, ok_scores), ({"math": 1}, True), "math on request materialises the (b,h,s,s) scores")
done()
