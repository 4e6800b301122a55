"""A constrained decode step's choice in one pass over the logits: each row's best token among
those its grammar allows, or EOS where it allows none or where the grammar may end and the
model's own best token lies outside it (infer/grammar.py says why).

logits [n, V] (any float dtype), words [n, W] int32: a row's packed mask, token t allowed when
bit t % 32 of word t // 32 is set (llguidance's layout; tokens past W * 32 are not allowed),
accepting [n] bool (the grammar could end here) -> int64 [n] token ids.

Kernel: grid (n,), one program per row stepping over the vocabulary in BLOCK columns, keeping
the running best allowed (value, index) and best overall (value, index); the mask bits are read
from the packed words as they are (4 bytes per 32 tokens), so the step reads the logits once.
The plain-torch reference, `masked_choice_ref`, unpacks the masks to a boolean matrix and takes
two argmaxes over a masked copy of the logits: the same choice at ~10x the memory traffic. Ties
go to the lowest index, as torch.argmax breaks them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from quail_kernels.checks import check_same_device, check_tensor


@triton.jit
def _masked_choice_kernel(logits_ptr, words_ptr, accepting_ptr, out_ptr, n_cols, n_words,
                          stride_l, stride_w, eos, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride_l
    wbase = words_ptr + row * stride_w
    best_v = -float("inf")
    best_i = 0
    top_v = -float("inf")
    top_i = 0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        valid = cols < n_cols
        x = tl.load(base + cols, mask=valid, other=-float("inf")).to(tl.float32)
        word = cols // 32
        w = tl.load(wbase + word, mask=valid & (word < n_words), other=0)
        allowed = ((w >> (cols % 32)) & 1) != 0
        # (strictly greater: a tie keeps the earlier block's index)
        v = tl.max(x, axis=0)
        i = tl.argmax(x, axis=0, tie_break_left=True)
        top_i = tl.where(v > top_v, start + i, top_i)
        top_v = tl.maximum(top_v, v)
        xm = tl.where(allowed, x, -float("inf"))
        vm = tl.max(xm, axis=0)
        im = tl.argmax(xm, axis=0, tie_break_left=True)
        best_i = tl.where(vm > best_v, start + im, best_i)
        best_v = tl.maximum(best_v, vm)
    top_word = tl.load(wbase + top_i // 32, mask=top_i // 32 < n_words, other=0)
    leaves = ((top_word >> (top_i % 32)) & 1) == 0
    ends = tl.load(accepting_ptr + row) != 0
    choice = tl.where((best_v == -float("inf")) | (leaves & ends), eos, best_i)
    tl.store(out_ptr + row, choice.to(tl.int64))


def masked_choice(logits: torch.Tensor, words: torch.Tensor, accepting: torch.Tensor,
                  eos: int, block: int = 4096) -> torch.Tensor:
    """See the module docstring."""
    check_tensor("logits", logits, 2)
    check_tensor("words", words, 2, dtypes=(torch.int32,))
    check_tensor("accepting", accepting, 1, dtypes=(torch.bool,))
    check_same_device(logits=logits, words=words, accepting=accepting)
    n, width = logits.shape
    if words.shape[0] != n or accepting.shape[0] != n:
        raise ValueError(f"rows: logits {n}, words {words.shape[0]}, accepting "
                         f"{accepting.shape[0]}")
    out = torch.empty(n, dtype=torch.int64, device=logits.device)
    if n:
        _masked_choice_kernel[(n,)](logits, words, accepting.view(torch.uint8), out, width,
                                    words.shape[1], logits.stride(0), words.stride(0), eos,
                                    BLOCK=block, num_warps=8)
    return out


def unpack_masks(words: torch.Tensor, width: int) -> torch.Tensor:
    """[n, W] int32 packed masks -> [n, width] bool (tokens past W * 32 not allowed)."""
    bits = (words.unsqueeze(-1) >> torch.arange(32, device=words.device, dtype=torch.int32)) & 1
    allowed = bits.bool().flatten(1)[:, :width]
    if allowed.shape[1] < width:
        allowed = torch.nn.functional.pad(allowed, (0, width - allowed.shape[1]))
    return allowed


def masked_choice_ref(logits: torch.Tensor, words: torch.Tensor, accepting: torch.Tensor,
                      eos: int) -> torch.Tensor:
    allowed = unpack_masks(words, logits.shape[1])
    best = torch.where(allowed, logits.float(), float("-inf")).argmax(dim=-1)
    leaves = ~allowed.gather(1, logits.float().argmax(dim=-1, keepdim=True)).squeeze(1)
    empty = ~allowed.any(dim=-1)
    return torch.where(empty | (leaves & accepting), eos, best)
