"""Engine test fixtures: a word-level tokenizer and a tiny random Llama, built by transformers
and loaded into our model class with the same weights (transformers is the reference)."""

from __future__ import annotations

import re

import pytest
import torch

WORDS = ["yes", "no", "true", "false", "positive", "negative", "neutral", "pos", "good", "bad",
         "the", "movie", "was", "a", "film", "great", "awful", "answer", "is", "it", "document",
         "N/A", "question", "sports", "sport", "news", "label"]


class WordTokenizer:
    """Each word and each space+word is one token; unknown words hash into the vocabulary."""

    eos_token_id = 1
    bos_token_id = 0
    chat_template = None

    def __init__(self, vocab_size: int = 256):
        self.vocab_size = vocab_size
        pieces = []
        for w in WORDS:
            for v in dict.fromkeys([w, w.lower(), w.capitalize(), w.upper()]):
                pieces += [v, " " + v]
        self.vocab = {"<bos>": 0, "<eos>": 1}
        for p in pieces:
            self.vocab.setdefault(p, len(self.vocab))
        assert len(self.vocab) < vocab_size
        self.inverse = {i: p for p, i in self.vocab.items()}

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = []
        for piece in re.findall(r"\s?\S+", text):
            if piece in self.vocab:
                ids.append(self.vocab[piece])
            else:
                ids.append(len(self.vocab) + sum(map(ord, piece)) % (self.vocab_size - len(self.vocab)))
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(self.inverse.get(i, f" w{i}") for i in ids if not (
            skip_special_tokens and i in (0, 1)))


def build_tiny_llama(vocab_size: int = 256, seed: int = 0):
    """(hf_model, our_model, our_config): same random weights, fp32, eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from quail_engine.infer.models.llama import LlamaForCausalLM as OurLlama
    from quail_engine.infer.models.llama import config_from_hf

    torch.manual_seed(seed)
    hf_config = LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=96,
                            num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                            max_position_embeddings=512, rms_norm_eps=1e-6, eos_token_id=1,
                            bos_token_id=0, tie_word_embeddings=False)
    hf = LlamaForCausalLM(hf_config).float().eval()
    with torch.no_grad():   # random init gives near-uniform logits; sharpen them
        hf.lm_head.weight.mul_(8.0)
    config = config_from_hf(hf_config.to_dict())
    ours = OurLlama(config).float().eval()
    missing, unexpected = ours.load_state_dict(hf.state_dict(), strict=False)
    assert not [m for m in missing if "rotary" not in m], missing
    return hf, ours, config


@pytest.fixture(scope="session")
def tiny_llama():
    return build_tiny_llama()


@pytest.fixture()
def engine(tiny_llama):
    from quail_engine.infer.engine import LocalEngine

    _, model, config = tiny_llama
    return LocalEngine(model, WordTokenizer(), config, model_id="tiny-llama", token_budget=64)


def hf_last_logits(hf, tokens: list[int]) -> torch.Tensor:
    """transformers' full forward, last position, full vocabulary."""
    with torch.no_grad():
        return hf(torch.tensor([tokens])).logits[0, -1].float()
