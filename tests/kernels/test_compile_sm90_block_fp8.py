"""The block-scaled fp8 kernels compile for the H200 (sm_90) at the Qwen3-4B launch shapes: the
Triton GEMM (fp8 tensor-core dots with per-group scales), the group quantizer, and the fused
epilogues' grouped variants (see test_compile_sm90.py for why a compile test)."""

import os
import subprocess
import sys

import pytest

triton = pytest.importorskip("triton")
from test_compile_sm90 import BF16, F32, FP8, ROWS, _compile  # noqa: E402

from quail_kernels.add_rmsnorm import _add_rmsnorm_kernel  # noqa: E402
from quail_kernels.block_fp8_gemm import (  # noqa: E402
    _block_fp8_gemm_kernel,
    _quantize_groups_kernel,
)
from quail_kernels.silu_mul import _silu_mul_group_kernel  # noqa: E402

GEMM_TILES = [(64, 128, 8, 4, 3), (128, 128, 8, 8, 3), (16, 64, 8, 4, 3)]  # launcher default first


def block_kernels() -> None:
    for bm, bn, group_m, warps, stages in GEMM_TILES:
        _compile(_block_fp8_gemm_kernel, {"a_ptr": FP8, "b_ptr": FP8, "c_ptr": BF16,
                                          "as_ptr": F32, "bs_ptr": F32}, {},
                 {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "GROUP_M": group_m}, warps,
                 stages)
    _compile(_quantize_groups_kernel, {"x_ptr": BF16, "out_ptr": FP8, "scale_ptr": F32}, {},
             {"G": 128, "STEP": 4}, 4)
    for has_res in (False, True):
        _compile(_add_rmsnorm_kernel, {"x_ptr": BF16, "res_ptr": BF16, "w_ptr": F32,
                                       "out_ptr": FP8, "res_out_ptr": BF16, "scale_ptr": F32},
                 {"eps": "fp32"}, {"HAS_RES": has_res, "IS_FP8": True, "BLOCK": 4096,
                                   "ROWS": ROWS, "G": 128}, 4 * ROWS)
    for gelu in (False, True):
        _compile(_silu_mul_group_kernel, {"x_ptr": BF16, "out_ptr": FP8, "scale_ptr": F32}, {},
                 {"G": 128, "STEP": 4, "GELU": gelu}, 4)


def test_block_fp8_kernels_compile():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = "import test_compile_sm90_block_fp8 as t; t.block_kernels()"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=os.path.dirname(__file__), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"failed to compile for sm_90:\n{done.stderr[-3000:]}"
