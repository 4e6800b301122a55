"""JsonTokenizer: a model directory's fast tokenizer read with the `tokenizers` library alone.

Loading a tokenizer through transformers imports transformers (seconds on a GPU machine, where
it pulls in torch.distributed, sympy and sklearn) and parses tokenizer.json through its own
wrappers; a query only needs encode, decode, the special tokens and the chat template. This
reads tokenizer.json with `tokenizers.Tokenizer.from_file`, the special tokens and chat template
from tokenizer_config.json (or chat_template.jinja), and renders the template with jinja2 the way
transformers does (sandboxed, trim_blocks, lstrip_blocks, loop controls, `tojson`,
`raise_exception`). tests/unit/engine/test_json_tokenizer.py checks it against transformers on
the embedded models. `load(directory)` returns None when the directory has no tokenizer.json.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any


class JsonTokenizer:
    is_fast = True

    def __init__(self, tokenizer: Any, config: dict, chat_template: str | None):
        self._tok = tokenizer
        self.config = config
        self.chat_template = chat_template
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        self.bos_token_id = self._id(self.bos_token)
        self.eos_token_id = self._id(self.eos_token)
        self._clean_spaces = bool(config.get("clean_up_tokenization_spaces", False))
        self._template = None

    @classmethod
    def load(cls, directory: str | Path) -> JsonTokenizer | None:
        from tokenizers import Tokenizer  # (deferred: off the CLI's start, which imports this)

        directory = Path(directory)
        if not (directory / "tokenizer.json").exists():
            return None
        config_path = directory / "tokenizer_config.json"
        config = json.loads(config_path.read_text()) if config_path.exists() else {}
        template = config.get("chat_template")
        if isinstance(template, list):  # named templates: the default one
            template = next((t["template"] for t in template if t.get("name") == "default"),
                            None)
        jinja = directory / "chat_template.jinja"
        if template is None and jinja.exists():
            template = jinja.read_text()
        return cls(Tokenizer.from_file(str(directory / "tokenizer.json")), config, template)

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self._tok.token_to_id(token)

    def __len__(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def tokenizer_json(self) -> str:
        """The tokenizer as the `tokenizers` library serializes it (what grammar matching
        reads: infer/grammar.py)."""
        return self._tok.to_str()

    def get_vocab(self) -> dict[str, int]:
        return self._tok.get_vocab(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False
                     ) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(list(texts),
                                                      add_special_tokens=add_special_tokens)]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        text = self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)
        return _clean_up(text) if self._clean_spaces else text

    def apply_chat_template(self, conversation: list[dict], tokenize: bool = False,
                            add_generation_prompt: bool = False, **kwargs: Any) -> Any:
        if not self.chat_template:
            raise ValueError("this tokenizer has no chat template")
        text = self._compiled().render(
            messages=conversation, add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token or "", eos_token=self.eos_token or "", **kwargs)
        return self.encode(text) if tokenize else text

    def _compiled(self):
        if self._template is None:
            # (deferred: jinja2, only to render a chat template; off the CLI's start)
            from jinja2.ext import loopcontrols
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            def raise_exception(message):
                raise ValueError(message)

            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[loopcontrols])
            env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: \
                json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
                           sort_keys=sort_keys)
            env.globals["raise_exception"] = raise_exception
            env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
            self._template = env.from_string(self.chat_template)
        return self._template


def _token_text(token: Any) -> str | None:
    if isinstance(token, dict):
        return token.get("content")
    return token


def _clean_up(text: str) -> str:
    """transformers' clean_up_tokenization (spaces before punctuation and contractions)."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                 (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text
