"""TextCodec: the engine's view of a tokenizer - plain encode/decode, end-of-sequence ids and the
chat layout split into a shareable head and a per-request tail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_SPLIT = "\u2063QUAIL_SPLIT\u2063"
BASE_ANSWER_HEADER = "\nAnswer:"   # stands in for the assistant header of a model with no chat template
_END_TOKENS = ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|endoftext|>")


class TextCodec:
    """Wraps a Hugging Face style tokenizer (`encode`, `decode`, `apply_chat_template`)."""

    def __init__(self, tokenizer: Any, config: Any = None):
        self.tokenizer = tokenizer
        ids = set(getattr(config, "eos_token_ids", ()) or ())
        if getattr(tokenizer, "eos_token_id", None) is not None:
            ids.add(int(tokenizer.eos_token_id))
        vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
        ids |= {vocab[t] for t in _END_TOKENS if t in vocab}
        self.eos_ids = ids
        self.bos_id = getattr(tokenizer, "bos_token_id", None)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` with no special tokens added (special-token text is parsed)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def decode_raw(self, ids: Sequence[int]) -> str:
        """Text of `ids` with special tokens spelled out (to show a prompt layout)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def render_chat(self, user_text: str) -> str:
        """One user turn and the assistant header, as text."""
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": user_text}], tokenize=False, add_generation_prompt=True)

    def chat_split(self, prefix_text: str, suffix_text: str) -> tuple[list[int], list[int]]:
        """(chat header + prefix_text, suffix_text + assistant header) as token ids. Without a
        chat template: BOS (when the model has one) + prefix_text, then suffix_text +
        BASE_ANSWER_HEADER."""
        if self.has_chat_template:
            head, _, tail = self.render_chat(prefix_text + _SPLIT + suffix_text).partition(_SPLIT)
        else:
            head, tail = prefix_text, suffix_text + BASE_ANSWER_HEADER
        head_ids = self.encode(head)
        if not self.has_chat_template and self.bos_id is not None:
            head_ids = [self.bos_id, *head_ids]
        return head_ids, self.encode(tail)
