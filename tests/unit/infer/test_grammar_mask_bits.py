"""The packed grammar masks unpack to the tokens llguidance allowed: token t is bit t % 32 of
word t // 32 of its row (int32 words), whatever the logits' width."""

from __future__ import annotations

import pytest
import torch

from quail_engine.infer.grammar import GrammarMasks


@pytest.mark.parametrize("rows,width", [(1, 32), (4, 33), (3, 70), (5, 49152), (2, 151936)])
def test_packed_masks_unpack_bit_for_bit(rows, width):
    generator = torch.Generator().manual_seed(rows * width)
    words = (width + 31) // 32
    packed = torch.randint(-2**31, 2**31 - 1, (rows, words), dtype=torch.int32,
                           generator=generator)
    allowed = GrammarMasks(None, [0])._allowed(torch.zeros(rows, width), packed)
    assert allowed.shape == (rows, width) and allowed.dtype == torch.bool
    for row in range(rows):
        for token in (0, 1, 7, 8, 31, width // 2, width - 1):
            expected = bool((int(packed[row, token // 32]) >> (token % 32)) & 1)
            assert bool(allowed[row, token]) == expected, (row, token)
    assert int(allowed.sum()) == sum(bin(int(w) & 0xFFFFFFFF).count("1")
                                     for w in packed[:, :width // 32].flatten()) + int(
        allowed[:, width // 32 * 32:].sum())
