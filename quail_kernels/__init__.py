"""Triton kernels for the GPU engine path, each beside its plain-torch reference `<op>_ref`.

Import name is `quail_kernels` (PyPI's `kernels` package is probed by transformers). Importing
this package needs torch; the kernel modules need triton (`HAS_TRITON` says whether it is there).
On a machine without a GPU, kernels run only under TRITON_INTERPRET=1 (set before importing triton).
"""

from __future__ import annotations

import importlib.util

HAS_TRITON = importlib.util.find_spec("triton") is not None

FP8_MAX = 448.0  # largest finite float8_e4m3fn
