"""cuda_choices.py: dispatch decisions aten takes from the device type, taken as on a CUDA GPU.

On the meta device two decisions come out differently from CUDA, and both change what is allocated:

* Dropout. at::dropout (aten/src/ATen/native/Dropout.cpp) takes the fused at::native_dropout only
  when is_fused_kernel_acceptable(): a CUDA/XPU/lazy/privateuse1 tensor, 0 < p < 1, numel > 0. It
  returns the output and a bool mask (1 byte per element, saved for backward). On meta or CPU it
  takes _dropout_impl instead (a noise tensor of the input's dtype, bernoulli_, a multiply), so the
  saved mask would be 4x too large in fp32. F.dropout/torch.dropout (not in place, training) are
  sent to native_dropout here.
* Scaled dot-product attention. at::scaled_dot_product_attention
  (aten/src/ATen/native/transformers/attention.cpp) asks _fused_sdp_choice_stub only for CUDA
  tensors; on meta it always runs the math composite and materialises the (b, h, s, s) scores. Here
  the backend is chosen with the rules of sdp::select_sdp_backend
  (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp) for a given compute capability, in the
  default priority order flash -> memory-efficient -> math, and the fused op is called directly: its
  meta function gives the outputs and the saved tensors (logsumexp, RNG state) it has on CUDA.

Not modelled: the cuDNN attention backend, which PyTorch puts first on sm_90/sm_100 when the runtime
cuDNN is newer than 9.15 (check_prefer_cudnn_attention) and which takes only 16-bit inputs, dropout
a multiple of 1/16 and the (b, s, h, d) layout; request "flash" or "efficient" explicitly to match.
"""
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

SDPA_BACKENDS = ("auto", "flash", "efficient", "math", "meta")
HALF = (torch.float16, torch.bfloat16)


def _last_dim_stride_ok(ts, ignore_singleton):
    for t in ts:
        if t.stride(-1) != 1 and not (ignore_singleton and t.size(-1) == 1):
            return False
    return True


def _heads_ok(q, k, v, enable_gqa):
    """check_batch_size_and_num_heads_dense: same batch; same heads, or (with enable_gqa) query heads
    a multiple of the key/value heads."""
    if q.dim() != 4 or not (q.size(0) == k.size(0) == v.size(0)):
        return False
    if q.size(1) == k.size(1) == v.size(1):
        return True
    return enable_gqa and k.size(1) == v.size(1) and q.size(1) % k.size(1) == 0


def can_use_flash(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa, sm):
    """sdp::can_use_flash_attention for a dense input on a GPU of compute capability sm."""
    d = q.size(-1)
    if attn_mask is not None or q.dtype not in HALF:
        return False
    if not (k.size(-1) == d and v.size(-1) == d and d <= 256):
        return False
    if not ((8, 0) <= sm <= (12, 1)):
        return False
    training = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if training and ((8, 6) <= sm <= (8, 9) or (12, 0) <= sm <= (12, 1)):
        if not (d <= 192 or (dropout_p == 0 and d > 224)):
            return False
    if is_causal and q.size(-2) != k.size(-2):
        return False
    if min(q.size(-2), k.size(-2)) == 0:
        return False
    return _heads_ok(q, k, v, enable_gqa) and _last_dim_stride_ok((q, k, v), True)


def gemm_alignment(dtype, sm):
    """minimum_gemm_alignment: elements a CUTLASS GEMM row must be a multiple of."""
    half = dtype in HALF
    align = 4 if sm[0] >= 8 else 1
    if sm[0] >= 8 or (sm[0] >= 7 and half):
        align = max(align, 128 // (16 if half else 32))
    return align


def can_use_efficient(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa, sm):
    """sdp::can_use_mem_efficient_attention for a dense input on a GPU of compute capability sm."""
    if not ((5, 0) <= sm <= (12, 1)):
        return False
    align = gemm_alignment(q.dtype, sm)
    dq, dv = q.size(-1), v.size(-1)
    if not (dq == k.size(-1) and dq > 0 and dv > 0 and dq % align == 0 and dv % align == 0):
        return False
    if sm[0] >= 8 and any(t.storage_offset() % align for t in (q, k, v) if t.numel()):
        return False
    if min(q.size(-2), k.size(-2)) == 0:
        return False
    dtypes = (torch.float16, torch.float32, torch.bfloat16) if sm[0] >= 8 else (torch.float16, torch.float32)
    return (q.dtype in dtypes and _heads_ok(q, k, v, enable_gqa)
            and _last_dim_stride_ok((q, k, v), False))


def choose_sdpa_backend(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, enable_gqa=False,
                        sm=(9, 0), requested="auto"):
    """The backend a CUDA GPU of compute capability sm runs for these inputs ("flash", "efficient"
    or "math"); a requested backend that cannot run these inputs is an error, as under
    torch.nn.attention.sdpa_kernel."""
    checks = {"flash": can_use_flash, "efficient": can_use_efficient}
    if requested == "math":
        return "math"
    if requested in checks:
        if not checks[requested](q, k, v, attn_mask, dropout_p, is_causal, enable_gqa, sm):
            raise RuntimeError(f"SDPA backend {requested!r} cannot run q{tuple(q.shape)} {q.dtype} "
                               f"(mask {attn_mask is not None}, causal {is_causal}) on sm_{sm[0]}{sm[1]}")
        return requested
    if requested != "auto":
        raise ValueError(f"unknown SDPA backend {requested!r} (one of {', '.join(SDPA_BACKENDS)})")
    for name in ("flash", "efficient"):
        if checks[name](q, k, v, attn_mask, dropout_p, is_causal, enable_gqa, sm):
            return name
    return "math"


def _additive_mask(attn_mask, dtype):
    """convert_boolean_attn_mask: a bool mask becomes zeros_like(dtype) with -inf filled where the
    mask is False."""
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return attn_mask
    out = torch.zeros_like(attn_mask, dtype=dtype)
    return out.masked_fill_(attn_mask.logical_not(), float("-inf"))


def _efficient_mask(mask, q, k):
    """preprocess_mask: expand to (b, h, L, S); pad the last dim to a multiple of 16 (then slice it
    back), or make it contiguous if a stride is not a multiple of 16."""
    mask = mask.expand(q.size(0), q.size(1), q.size(2), k.size(2))
    s = mask.size(-1)
    if s % 16:
        return F.pad(mask, (0, 16 - s % 16))[..., :s]
    if any(mask.stride(i) % 16 for i in range(3)):
        return mask.contiguous()
    return mask


def _math_sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """_scaled_dot_product_attention_math, with its at::dropout taken as CUDA takes it."""
    if dropout_p == 0.0:
        return torch.ops.aten._scaled_dot_product_attention_math(
            q, k, v, attn_mask, 0.0, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]
    sf = (scale if scale is not None else q.size(-1) ** -0.5) ** 0.5
    if is_causal:
        attn_mask = _additive_mask(torch.ones(q.size(-2), k.size(-2), dtype=torch.bool,
                                              device=q.device).tril(), q.dtype)
    if enable_gqa and k.size(-3) != q.size(-3):
        rep = q.size(-3) // k.size(-3)
        k, v = k.repeat_interleave(rep, dim=-3), v.repeat_interleave(rep, dim=-3)
    attn = torch.matmul(q * sf, k.transpose(-2, -1) * sf)
    if attn_mask is not None:
        attn.add_(attn_mask)
    attn = torch.softmax(attn, -1)
    attn = torch.native_dropout(attn, dropout_p, True)[0]
    return torch.matmul(attn, v)


class CudaChoices(TorchFunctionMode):
    """Sends dropout and SDPA where a CUDA GPU of compute capability sm sends them; counts the SDPA
    backends used in self.sdpa_calls."""

    def __init__(self, sdpa="auto", sm=(9, 0)):
        super().__init__()
        if sdpa not in SDPA_BACKENDS:
            raise ValueError(f"unknown SDPA backend {sdpa!r} (one of {', '.join(SDPA_BACKENDS)})")
        self.sdpa = sdpa
        self.sm = sm
        self.sdpa_calls = {}

    def _dropout(self, x, p=0.5, training=True, inplace=False):
        if training and 0 < p < 1 and x.numel() > 0 and not inplace:
            return torch.native_dropout(x, p, True)[0]
        return None

    def _sdpa(self, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        backend = choose_sdpa_backend(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa, self.sm,
                                      self.sdpa)
        self.sdpa_calls[backend] = self.sdpa_calls.get(backend, 0) + 1
        if backend == "flash":
            return torch.ops.aten._scaled_dot_product_flash_attention(
                q, k, v, dropout_p, is_causal, False, scale=scale)[0]
        attn_mask = _additive_mask(attn_mask, q.dtype)
        if backend == "efficient":
            if attn_mask is not None:
                attn_mask = _efficient_mask(attn_mask, q, k)
            lse = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
            return torch.ops.aten._scaled_dot_product_efficient_attention(
                q, k, v, attn_mask, lse, dropout_p, is_causal, scale=scale)[0]
        return _math_sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention and self.sdpa != "meta":
            return self._sdpa(*args, **kwargs)
        if func is F.dropout or func is torch.dropout:
            names = ("p", "training", "inplace") if func is F.dropout else ("p", "train")
            kw = dict(zip(names, args[1:]))
            kw.update(kwargs)
            if "train" in kw:
                kw["training"] = kw.pop("train")
            out = self._dropout(args[0], **kw)
            if out is not None:
                return out
        return func(*args, **kwargs)
