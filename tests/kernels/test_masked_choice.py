"""The fused masked choice of a constrained decode step (quail_kernels/masked_choice.py)
against its plain-torch reference and the grammar's own unpacking of llguidance's masks."""

from types import SimpleNamespace

import pytest
import torch

from quail_kernels.masked_choice import masked_choice, masked_choice_ref, unpack_masks

EOS = 7


def _case(n, width, density, dtype, device, seed=0, words_extra=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, width, generator=g).to(dtype)
    words = (width + 31) // 32 + words_extra
    bits = torch.rand(n, words, 32, generator=g) < density
    packed = (bits.long() << torch.arange(32)).sum(-1)  # bit t % 32 of word t // 32
    packed = (packed - (packed >= 1 << 31).long() * (1 << 32)).to(torch.int32)
    accepting = torch.rand(n, generator=g) < 0.5
    return logits.to(device), packed.to(device), accepting.to(device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("density", [0.0, 0.001, 0.3, 1.0])
def test_the_kernel_chooses_as_the_reference_ties_and_all(device, dtype, density):
    # bf16 logits over 10k tokens tie often: the lowest index must win, across blocks too
    logits, words, accepting = _case(24, 10_003, density, dtype, device)
    got = masked_choice(logits, words, accepting, EOS, block=1024)
    want = masked_choice_ref(logits, words, accepting, EOS)
    assert torch.equal(got.cpu(), want.cpu())
    if density == 0.0:
        assert (got == EOS).all()  # nothing allowed: the row ends


def test_equal_logits_choose_the_first_allowed_token(device):
    logits = torch.zeros(2, 9000)
    words = torch.zeros(2, 282, dtype=torch.int32)
    words[0, 0] = 1 << 4  # tokens 4 and 8200 (word 256, bit 8)
    words[:, 256] = 1 << 8
    got = masked_choice(logits.to(device), words.to(device),
                        torch.tensor([False, False]).to(device), EOS, block=1024)
    assert got.tolist() == [4, 8200]


def test_the_answer_ends_where_the_grammar_may_end_and_the_model_leaves_it(device):
    logits = torch.zeros(2, 64)
    logits[:, 40] = 5.0  # the model's own best token
    logits[:, 3] = 1.0
    words = torch.tensor([[1 << 3, 0], [1 << 3, 0]], dtype=torch.int32)  # only token 3
    accepting = torch.tensor([True, False])
    got = masked_choice(logits.to(device), words.to(device), accepting.to(device), EOS)
    assert got.tolist() == [EOS, 3]


def test_a_mask_narrower_than_the_logits_allows_nothing_past_it(device):
    logits = torch.zeros(1, 100)
    logits[0, 90] = 9.0
    logits[0, 5] = 1.0
    words = torch.tensor([[(1 << 5)]], dtype=torch.int32)  # 32 tokens of mask
    got = masked_choice(logits.to(device), words.to(device),
                        torch.tensor([False]).to(device), EOS)
    assert got.tolist() == [5]


def test_the_reference_unpacks_as_the_grammar_does():
    from quail_engine.infer.grammar import GrammarMasks

    logits, words, _ = _case(5, 1000, 0.3, torch.float32, "cpu", words_extra=1)
    theirs = GrammarMasks._allowed(SimpleNamespace(_byte_bits={}), logits, words)
    assert torch.equal(unpack_masks(words, 1000), theirs)


def test_bad_arguments_are_named(device):
    logits, words, accepting = _case(4, 64, 0.5, torch.float32, device)
    with pytest.raises(ValueError, match="words"):
        masked_choice(logits, words.long(), accepting, EOS)
    with pytest.raises(ValueError, match="rows"):
        masked_choice(logits, words[:3], accepting, EOS)
