"""Every Triton kernel compiles for the H200 (sm_90) at the configurations the GPU path
launches, on any machine: the interpreter checks what a kernel computes, this checks that
Triton's code generator and ptxas accept it (a GPU-only compile error would otherwise first show
on the device). The compiles run in a child process without TRITON_INTERPRET (under it,
@triton.jit makes interpreted functions, which do not compile)."""

import os
import subprocess
import sys

import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from quail_kernels.add_rmsnorm import _add_rmsnorm_kernel  # noqa: E402
from quail_kernels.kv_store_fp8 import _kv_store_fp8_kernel  # noqa: E402
from quail_kernels.lse_merge import _lse_merge_kernel  # noqa: E402
from quail_kernels.prefix_attention import _prefix_amax_kernel, _prefix_attention_kernel  # noqa: E402
from quail_kernels.qk_norm_rope import _qk_norm_rope_kernel  # noqa: E402
from quail_kernels.silu_mul import _silu_mul_kernel  # noqa: E402
from quail_kernels.varlen_attention import (  # noqa: E402
    _row_amax_kernel,
    _running_max_kernel,
    _varlen_attention_kernel,
)

SM90 = GPUTarget("cuda", 90, 32)
BF16, F32, I32, FP8 = "*bf16", "*fp32", "*i32", "*fp8e4nv"


def _compile(fn, pointers: dict, scalars: dict, constexprs: dict, warps: int, stages: int = 3):
    signature = {}
    for name in fn.arg_names:
        if name in constexprs:
            signature[name] = "constexpr"
        else:
            signature[name] = pointers.get(name) or scalars.get(name, "i32")
    src = ASTSource(fn=fn, signature=signature,
                    constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    kernel = triton.compile(src, target=SM90, options={"num_warps": warps, "num_stages": stages})
    assert kernel.asm["cubin"], f"{fn.__name__}: no cubin"


ATTN = {"q_ptr": BF16, "k_ptr": BF16, "v_ptr": BF16, "o_ptr": BF16, "lse_ptr": F32,
        "cu_ptr": I32, "seqs_ptr": I32, "bt_ptr": I32, "plen_ptr": I32, "pos_ptr": "*i64"}
DECODE_TILES = {128: [(16, 64, 2, 3)]}
BLOCKS = {128: [(64, 64, 4, 3), (64, 32, 4, 3), (128, 128, 8, 3), (64, 16, 4, 3)], 256: [(64, 32, 4, 2)]}


def attention_kernels(head_dim: int, window: bool) -> None:
    for bm, bn, warps, stages in BLOCKS[head_dim]:
        common = {"G": 4, "D": head_dim, "BLOCK_M": bm, "BLOCK_N": bn, "HAS_WINDOW": window}
        # fp8 output; bf16 over every sequence; over a subset (a launch of a pass split by
        # length or beside the library), fp8 and bf16; bf16 over a subset in launch order (the
        # probe's comparison)
        # (out: "fp8", "bf16", or "fp32": a partial an LSE merge reads)
        for out, seqs, last_first in (("fp8", False, True), ("bf16", False, True),
                                      ("fp32", False, True), ("fp8", True, True),
                                      ("bf16", True, True), ("fp32", True, True),
                                      ("bf16", True, False)):
            fp8 = out == "fp8"
            _compile(_varlen_attention_kernel,
                     {**ATTN, "o_ptr": {"fp8": FP8, "bf16": BF16, "fp32": F32}[out],
                      "amax_ptr": F32, "scale_ptr": F32},
                     {"qk_scale": "fp32"},
                     {**common, "OUT_FP8": fp8, "HAS_SEQS": seqs, "LAST_FIRST": last_first},
                     warps, stages)
        _compile(_row_amax_kernel, {"x_ptr": BF16, "out_ptr": F32}, {},
                 {"N": 8 * head_dim, "BLOCK": 8 * head_dim, "ROWS": 16}, 4)
        for has_start in (False, True):
            _compile(_running_max_kernel, {"x_ptr": F32, "cu_ptr": I32, "start_ptr": F32,
                                           "out_ptr": F32}, {},
                     {"HAS_START": has_start, "BLOCK": 1024}, 4)
        # the arena in the model dtype, and in fp8 with a scale per token and KV head
        for kv_fp8, o in ((False, BF16), (False, F32), (True, BF16), (True, F32)):
            kv = FP8 if kv_fp8 else BF16
            _compile(_prefix_attention_kernel,
                     {**ATTN, "k_ptr": kv, "v_ptr": kv, "ks_ptr": F32, "vs_ptr": F32,
                      "o_ptr": o, "vmax_ptr": F32},
                     {"qk_scale": "fp32"},
                     {**common, "PAGE": 64, "KV_FP8": kv_fp8, "V_WORDS": kv_fp8, "PTX": kv_fp8,
                      "QC": tl.float16, "TRACK_V": False}, warps, stages)
        _compile(_prefix_amax_kernel, {"v_ptr": BF16, "bt_ptr": I32, "plen_ptr": I32,
                                       "out_ptr": F32}, {},
                 {"N": 8 * head_dim, "BLOCK": 8 * head_dim, "PAGE": 64, "ROWS": 16}, 4)
    # the decode step's tile (gpu/attention.decode_blocks)
    # (and a float32 q over the fp8 arena: the reference engine's products stay float32)
    for bm, bn, warps, stages in DECODE_TILES.get(head_dim, []):
        for kv_fp8, q, qc in ((False, BF16, tl.float16), (True, BF16, tl.float16),
                              (True, F32, tl.float32)):
            kv = FP8 if kv_fp8 else BF16
            _compile(_prefix_attention_kernel,
                     {**ATTN, "q_ptr": q, "k_ptr": kv, "v_ptr": kv, "ks_ptr": F32,
                      "vs_ptr": F32, "vmax_ptr": F32},
                     {"qk_scale": "fp32"},
                     {"G": 4, "D": head_dim, "BLOCK_M": bm, "BLOCK_N": bn, "HAS_WINDOW": window,
                      "PAGE": 64, "KV_FP8": kv_fp8, "V_WORDS": kv_fp8, "PTX": kv_fp8, "QC": qc,
                      # a bf16 arena's fp8 decode takes its rows' bound from the tiles
                      "TRACK_V": not kv_fp8 and not window},
                     warps, stages)


# (hidden block, intermediate blocks, query heads, KV heads, head_dim): Qwen3-4B, Gemma-3-270M
SHAPES = {"qwen3-4b": (4096, (8192, 2048), 32, 8, 128), "gemma3-270m": (1024, (2048, 1), 4, 1, 256)}


ROWS = 2  # add_rmsnorm's rows per program in the GPU path


def row_kernels(fp8: bool, shape: str) -> None:
    out = FP8 if fp8 else BF16
    block, (block_a, block_b), hq, _, head_dim = SHAPES[shape]
    for has_res in (False, True):
        _compile(_add_rmsnorm_kernel, {"x_ptr": BF16, "res_ptr": BF16, "w_ptr": F32,
                                       "out_ptr": out, "res_out_ptr": BF16, "scale_ptr": F32},
                 {"eps": "fp32"},
                 {"HAS_RES": has_res, "IS_FP8": fp8, "BLOCK": block, "ROWS": ROWS, "G": 0},
                 4 * ROWS)
    for gelu in (False, True):
        _compile(_silu_mul_kernel, {"x_ptr": BF16, "out_ptr": out, "scale_ptr": F32}, {},
                 {"IS_FP8": fp8, "BLOCK_A": block_a, "BLOCK_B": block_b, "GELU": gelu}, 16)
    # float32 partials (ours) with a bf16 third (the library's), or all bf16 (decode's one)
    for parts, partial in ((1, F32), (2, F32), (3, F32), (1, BF16)):
        ptrs = {f"o{i}_ptr": partial for i in (1, 2)} | {"o3_ptr": BF16} | \
            {f"l{i}_ptr": F32 for i in (1, 2, 3)}
        for bound in ((False, True) if fp8 else (False,)):
            _compile(_lse_merge_kernel, {**ptrs, "out_ptr": out, "scale_ptr": F32,
                                         "bound_ptr": F32}, {},
                     {"H": hq, "D": head_dim, "BLOCK_H": triton.next_power_of_2(hq),
                      "PARTS": parts, "IS_FP8": fp8, "HAS_BOUND": bound}, 4)


def qk_norm_rope(has_norm: bool, shape: str) -> None:
    _, _, hq, hkv, head_dim = SHAPES[shape]
    _compile(_qk_norm_rope_kernel, {"qkv_ptr": BF16, "pos_ptr": "*i64", "cs_ptr": F32,
                                    "qw_ptr": F32, "kw_ptr": F32}, {"eps": "fp32"},
             {"HQ": hq, "HB": hkv, "HALF": head_dim // 2,
              "BLOCK_H": triton.next_power_of_2(hkv), "HAS_NORM": has_norm}, 4)


def kv_store(shape: str) -> None:
    """The fp8 KV arena's store (QUAIL_KV_DTYPE=fp8) at the model's KV heads and head size."""
    _, _, _, hkv, head_dim = SHAPES[shape]
    _compile(_kv_store_fp8_kernel, {"k_ptr": BF16, "v_ptr": BF16, "slot_ptr": "*i64",
                                    "kc_ptr": FP8, "vc_ptr": FP8, "ks_ptr": F32, "vs_ptr": F32},
             {}, {"H": hkv, "D": head_dim, "PAGE": 64, "BLOCK_H": triton.next_power_of_2(hkv)},
             4)


def _in_child(call: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = f"import test_compile_sm90 as t; t.{call}"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=os.path.dirname(__file__), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{call} failed to compile for sm_90:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("head_dim", [128, 256])
@pytest.mark.parametrize("window", [False, True])
def test_attention_kernels_compile(head_dim, window):
    _in_child(f"attention_kernels({head_dim}, {window})")


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("fp8", [False, True])
def test_row_kernels_compile(fp8, shape):
    _in_child(f"row_kernels({fp8}, {shape!r})")


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("has_norm", [False, True])
def test_qk_norm_rope_compiles(has_norm, shape):
    _in_child(f"qk_norm_rope({has_norm}, {shape!r})")


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_kv_store_compiles(shape):
    _in_child(f"kv_store({shape!r})")
