"""Host-to-GPU staging that never makes the host wait for queued GPU work."""

from __future__ import annotations

import torch


def to_device(x, device: torch.device, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """A host list/tensor on `device` without making the host wait for queued GPU work (pinned
    staging + non_blocking copy); device tensors pass through."""
    t = x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=dtype)
    if t.device.type == device.type and device.index in (None, t.device.index):
        return t  # already there ("cuda" names whichever cuda device the tensor is on)
    if device.type == "cuda" and t.device.type == "cpu":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)
