"""Store one layer's new keys and values into an e4m3 paged arena in one launch: each (token,
KV head) row of D values quantized with its own scale (kv_fp8.quantize_kv's format) and written
with that scale at the token's flat slot.

k, v [N, Hkv, D] (any float dtype; unit last stride, any token/head strides); slots [N] int64
flat arena slots (page * PAGE + offset); k_cache, v_cache [P * PAGE, Hkv, D] e4m3 and
k_scale, v_scale [P, Hkv, PAGE] float32 (kv_fp8.scales_by_head), all contiguous (one layer of
PagedKVArena, its values flattened).

Kernel: grid (N,); a program loads its token's [Hkv, D] block of K, then of V, and writes the
e4m3 values and the Hkv scales. In torch the same store is a dozen small kernels per layer
(amax, divide, clamp, cast, two scatters, for K and for V), which a decode step would pay on
every layer.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from quail_kernels.checks import check_tensor
from quail_kernels.kv_fp8 import KV_FP8, quantize_kv, scales_by_token


@triton.jit
def _quantize_row(x_ptr, c_ptr, sc_ptr, row, slot, s_xt, s_xh, h, d, h_ok, HD: tl.constexpr,
                  H: tl.constexpr, PAGE: tl.constexpr):
    x = tl.load(x_ptr + row * s_xt + h[:, None] * s_xh + d[None, :], mask=h_ok[:, None],
                other=0.0).to(tl.float32)
    # kv_fp8.quantize_kv: amax / 448 (FP8_MAX), at least float32's smallest normal; IEEE
    # divisions (div_rn; Triton's `/` may be approximate), so the bytes equal torch's
    amax = tl.max(tl.abs(x), axis=1)
    scale = tl.maximum(tl.div_rn(amax, tl.full(amax.shape, 448.0, tl.float32)),
                       1.1754943508222875e-38)
    q = tl.div_rn(x, tl.broadcast_to(scale[:, None], x.shape))
    q = tl.minimum(tl.maximum(q, -448.0), 448.0)
    tl.store(c_ptr + slot * HD + h[:, None] * (HD // H) + d[None, :],
             q.to(c_ptr.dtype.element_ty), mask=h_ok[:, None])
    tl.store(sc_ptr + slot // PAGE * (H * PAGE) + h * PAGE + slot % PAGE, scale, mask=h_ok)


@triton.jit
def _kv_store_fp8_kernel(k_ptr, v_ptr, slot_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr,
                         s_kt, s_kh, s_vt, s_vh,
                         H: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr,
                         BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + row).to(tl.int64)
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, D)
    h_ok = h < H
    _quantize_row(k_ptr, kc_ptr, ks_ptr, row, slot, s_kt, s_kh, h, d, h_ok, H * D, H, PAGE)
    _quantize_row(v_ptr, vc_ptr, vs_ptr, row, slot, s_vt, s_vh, h, d, h_ok, H * D, H, PAGE)


def kv_store_fp8(k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor, k_cache: torch.Tensor,
                 v_cache: torch.Tensor, k_scale: torch.Tensor, v_scale: torch.Tensor) -> None:
    check_tensor("k", k, 3)
    check_tensor("v", v, 3)
    check_tensor("slots", slots, 1, dtypes=(torch.int64,))
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_tensor(name, t, 3, dtypes=(KV_FP8,))
        if not t.is_contiguous() or t.shape[1:] != k.shape[1:]:
            raise ValueError(f"{name} {tuple(t.shape)}: contiguous [slots, Hkv, D] rows of "
                             f"k's {tuple(k.shape[1:])} expected")
    page = k_scale.shape[-1]
    for name, t in (("k_scale", k_scale), ("v_scale", v_scale)):
        check_tensor(name, t, 3, dtypes=(torch.float32,))
        if not t.is_contiguous() or t.shape[1] != k.shape[1] or \
                t.shape[0] * page != k_cache.shape[0] or t.shape[2] != page:
            raise ValueError(f"{name} {tuple(t.shape)}: contiguous [P, Hkv, PAGE] scales of "
                             f"{k_cache.shape[0]} slots expected")
    if v.shape != k.shape or slots.shape[0] != k.shape[0]:
        raise ValueError(f"k {tuple(k.shape)}, v {tuple(v.shape)}, slots {tuple(slots.shape)}")
    num_tokens, heads, head_dim = k.shape
    if num_tokens == 0:
        return
    _kv_store_fp8_kernel[(num_tokens,)](
        k, v, slots, k_cache, v_cache, k_scale, v_scale, k.stride(0), k.stride(1), v.stride(0),
        v.stride(1), H=heads, D=head_dim, PAGE=page, BLOCK_H=triton.next_power_of_2(heads))


def kv_store_fp8_ref(k, v, slots, k_cache, v_cache, k_scale, v_scale) -> None:
    page = k_scale.shape[-1]
    for x, cache, scales in ((k, k_cache, k_scale), (v, v_cache, v_scale)):
        x8, scale = quantize_kv(x)
        cache.view(torch.uint8)[slots] = x8.view(torch.uint8)  # (index_put of float8: bytes)
        scales_by_token(scales)[slots // page, slots % page] = scale
