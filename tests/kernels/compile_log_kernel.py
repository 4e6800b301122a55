"""A kernel for test_compile_log.py (Triton compiles only functions defined in a file)."""

import triton
import triton.language as tl


@triton.jit
def fill_iota(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, i, mask=i < n)
