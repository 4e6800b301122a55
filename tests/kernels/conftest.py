"""Kernel tests run on a GPU when there is one, else on CPU under TRITON_INTERPRET=1 (which must
be set before triton is imported). Without triton installed the whole folder is skipped."""

import importlib.util
import os

import pytest

HAS_TRITON = importlib.util.find_spec("triton") is not None


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


if HAS_TRITON and not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")

collect_ignore_glob = [] if HAS_TRITON else ["test_*.py"]


@pytest.fixture(scope="session")
def device():
    return "cuda" if _has_cuda() else "cpu"
