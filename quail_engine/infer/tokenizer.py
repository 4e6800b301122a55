"""Tokenizer: a Hugging Face fast tokenizer with batch encoding and thinking-free chat prompts.

It forwards every other attribute to the wrapped tokenizer, so code written against the HF API
(`encode`, `decode`, `get_vocab`, `eos_token_id`, `chat_template`) keeps working.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from quail_engine.errors import ModelError
from quail_engine.infer.json_tokenizer import JsonTokenizer

logger = logging.getLogger(__name__)


class Tokenizer:
    def __init__(self, hf_tokenizer: Any):
        self.hf = hf_tokenizer

    def __getattr__(self, name: str) -> Any:
        if name == "hf":
            raise AttributeError(name)
        return getattr(self.hf, name)

    def __len__(self) -> int:
        return len(self.hf)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.hf(*args, **kwargs)

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
        """Token ids of each text, tokenized in one batched call (fast tokenizers run it in
        parallel)."""
        if not texts:
            return []
        if isinstance(self.hf, JsonTokenizer):
            return self.hf.encode_batch(texts, add_special_tokens)
        return [list(ids) for ids in self.hf(list(texts), add_special_tokens=add_special_tokens)
                ["input_ids"]]

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any:
        """HF's apply_chat_template with `enable_thinking=False` unless the caller sets it
        (Qwen3-style templates then emit an empty think block; others ignore the flag)."""
        kwargs.setdefault("enable_thinking", False)
        return self.hf.apply_chat_template(conversation, **kwargs)

    def chat_prompt(self, user_text: str) -> str:
        """One user turn plus the assistant header, as text; the bare text without a template."""
        if not getattr(self.hf, "chat_template", None):
            return user_text
        return self.apply_chat_template([{"role": "user", "content": user_text}], tokenize=False,
                                        add_generation_prompt=True)


VOCAB_FILES = ("tokenizer.json", "vocab.json", "vocab.txt")  # (besides *.model, *.tiktoken)


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """The fast tokenizer saved in a HF model directory: its tokenizer.json read with the
    `tokenizers` library alone (infer/json_tokenizer.py: no transformers import, and faster
    than transformers' own reading of a large tokenizer.json), else through transformers."""
    try:
        fast = JsonTokenizer.load(directory)
    except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception on bad JSON
        logger.info("tokenizer.json in %s not read directly (%s); using transformers",
                    directory, exc)
        fast = None
    if fast is not None:
        return Tokenizer(fast)
    folder = Path(directory)
    if not (folder.is_dir() and any(p.name in VOCAB_FILES or p.suffix in (".model", ".tiktoken")
                                    for p in folder.iterdir())):
        # (transformers makes a one-token tokenizer of a folder with config.json alone)
        raise ModelError(f"no tokenizer in {str(directory)!r}: none of "
                         f"{', '.join(VOCAB_FILES)}, *.model, *.tiktoken")
    from transformers import AutoTokenizer  # the fallback only: slow to import, optional

    try:  # (the folder's own files only: one without them must fail here, not go on to the
        # network, where a machine without one waits minutes on retries)
        hf = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load a tokenizer from {str(directory)!r}: {exc}") from exc
    if not getattr(hf, "is_fast", False):
        logger.warning("tokenizer in %s is not a fast tokenizer; batch encoding will be slow",
                       directory)
    return Tokenizer(hf)
