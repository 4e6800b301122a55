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
        self._frame: tuple[str, str, bool, bool] | None = None

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

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode` of many texts in one call (a fast tokenizer spreads it over the cores)."""
        batch = getattr(self.tokenizer, "encode_batch", None)
        if batch is not None:
            return [list(ids) for ids in batch(list(texts))]
        return [self.encode(t) for t in texts]

    def _chat_frame(self) -> tuple[str, str, bool, bool]:
        """(text before the user turn's content, text after it, whether the template strips the
        content's leading / trailing whitespace), from two renders of the template."""
        if self._frame is None:
            before, _, after = self.render_chat(_SPLIT).partition(_SPLIT)
            padded = self.render_chat(" " + _SPLIT + " ")
            self._frame = (before, after, not padded.startswith(before + " "),
                           not padded.endswith(" " + after))
        return self._frame

    def head_text(self, prefix_text: str) -> str:
        """The text whose ids (after `bos_head`) are the chat header + `prefix_text`."""
        if not self.has_chat_template:
            return prefix_text
        before, _, strip_left, _ = self._chat_frame()
        return before + (prefix_text.lstrip() if strip_left else prefix_text)

    def tail_text(self, suffix_text: str) -> str:
        """The text whose ids are `suffix_text` + the assistant header."""
        if not self.has_chat_template:
            return suffix_text + BASE_ANSWER_HEADER
        _, after, _, strip_right = self._chat_frame()
        return (suffix_text.rstrip() if strip_right else suffix_text) + after

    @property
    def bos_head(self) -> list[int]:
        """Ids that precede every head: BOS for a model with no chat template (one with a
        template spells its own), else nothing."""
        return [self.bos_id] if not self.has_chat_template and self.bos_id is not None else []

    def chat_split(self, prefix_text: str, suffix_text: str) -> tuple[list[int], list[int]]:
        """(chat header + prefix_text, suffix_text + assistant header) as token ids: the user
        turn `prefix_text + suffix_text` rendered by the chat template and cut between the two
        (the template's own stripping applies to the turn's ends only). Without a chat template:
        BOS (when the model has one) + prefix_text, then suffix_text + BASE_ANSWER_HEADER."""
        return (self.bos_head + self.encode(self.head_text(prefix_text)),
                self.encode(self.tail_text(suffix_text)))
