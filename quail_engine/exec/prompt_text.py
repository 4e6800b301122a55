"""PromptText: the executor's tokenizer side — prompt parts to token ids, and the model identity
answers are cached under — kept apart from the model weights, so a query whose answers are all
cached loads no model, and the text side loads no weights.

A prompt is (head, tail): head = chat header + document text (the shareable prefix), tail =
question text + assistant header. Each distinct head, tail or plain text is tokenized once per
query through a TokenStore (persisted per tokenizer when the session has a cache directory).
Head ids are exactly the ids the fully rendered prompt gives up to the cut (infer/textio.py:
the chat template is rendered once into the text before and after the user turn).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from quail_engine.exec.token_store import TokenStore
from quail_engine.infer.embedded import embedded_name
from quail_engine.infer.model_ref import ModelRef


class PromptText:
    """`codec_factory` (called once, when a text must be tokenized): an infer.textio.TextCodec,
    or for engines without one (test fakes) the engine itself (`tokenize`, `chat_split`).
    `identity`: the model's content identity, or a callable giving it (called once, lazily:
    resolving a model may convert it)."""

    def __init__(self, codec_factory: Callable[[], object], identity: str | Callable[[], str],
                 tokens_dir: str | Path | None = None,
                 model_name: str | Callable[[], str] = "", time_load: bool = True):
        self._codec_factory = codec_factory
        self._time_load = time_load  # False when loading the codec loads the engine (timed there)
        self._model_name = model_name  # the name the user gave the model (prompt layouts)
        self._codec = None
        self.load_s = 0.0  # seconds spent loading the tokenizer (the report counts it as load)
        self._identity = identity
        self._tokens_dir = Path(tokens_dir) if tokens_dir is not None else None
        self._stores: tuple[TokenStore, TokenStore, TokenStore] | None = None

    @classmethod
    def of_engine(cls, engine_getter: Callable[[], object],
                  tokens_dir: str | Path | None = None) -> PromptText:
        """Text side of an engine (its tokenizer, its model id); loads the engine when first
        needed."""
        def codec():
            engine = engine_getter()
            return getattr(engine, "codec", None) or engine

        return cls(codec, lambda: engine_getter().model_id, tokens_dir,
                   lambda: engine_getter().model_id, time_load=False)

    @classmethod
    def of_model(cls, spec: str, tokens_dir: str | Path | None = None, variant: str = "",
                 resolve: Callable[[], object] | None = None
                 ) -> tuple[PromptText, Callable[[], object]]:
        """Text side of the model `spec` names (its tokenizer alone, loaded when first needed;
        the model resolved — a GGUF converted — when first needed), and a callable giving the
        model's config (for the cost model) without reading weights. `variant`: settings that
        change answers beyond the model's files (appended to its identity); `resolve`: gives
        the infer.model_ref.ModelRef (default: ModelRef.resolve(spec))."""
        if resolve is None:
            def resolve():
                return ModelRef.resolve(spec)

        resolved: list = []

        def ref():
            # resolving imports the inference runtime (torch: seconds) and may convert a GGUF:
            # model load, counted in load_s wherever it first happens (the model's identity,
            # its config for the cost model, or its tokenizer)
            if not resolved:
                start = time.perf_counter()
                resolved.append(resolve())
                text.load_s += time.perf_counter() - start
            return resolved[0]

        def name() -> str:  # the embedded model's name for its GGUF file given by path too
            return embedded_name(spec)

        text = cls(lambda: ref().codec(), lambda: ref().identity + variant, tokens_dir, name)
        return text, lambda: ref().config()

    @property
    def model_name(self) -> str:
        if callable(self._model_name):
            self._model_name = self._model_name()
        return self._model_name

    @property
    def identity(self) -> str:
        if callable(self._identity):
            self._identity = self._identity()
        return self._identity

    @property
    def codec(self):
        if self._codec is None:
            start, before = time.perf_counter(), self.load_s
            self._codec = self._codec_factory()
            if self._time_load:  # the factory's own timed parts (the model's resolution) included
                self.load_s = before + time.perf_counter() - start
        return self._codec

    def _store(self, i: int) -> TokenStore:
        if self._stores is None:
            directory = None
            if self._tokens_dir is not None:
                directory = self._tokens_dir / hashlib.sha256(
                    self.identity.encode()).hexdigest()[:24]
            self._stores = tuple(
                TokenStore(encode, directory and directory / name) for name, encode in (
                    ("head", self._encode_heads), ("tail", self._encode_tails),
                    ("plain", self._encode_plain)))
        return self._stores[i]

    def tokenizer(self):
        """The tokenizer the codec wraps (loading it if needed), to hand to the engine so the
        model's tokenizer is read once per process; None for a codec that is not a TextCodec."""
        return getattr(self.codec, "tokenizer", None)

    def heads(self, prefix_texts: Sequence[str]) -> list[list[int]]:
        """Chat header + each document (BOS first for a model without a chat template)."""
        return self._store(0).ids(prefix_texts)

    def tails(self, suffix_texts: Sequence[str]) -> list[list[int]]:
        return self._store(1).ids(suffix_texts)

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return self._store(2).ids(texts)

    def split(self, prefix_text: str, suffix_text: str) -> tuple[list[int], list[int]]:
        return self.heads([prefix_text])[0], self.tails([suffix_text])[0]

    def flush(self) -> None:
        for store in self._stores or ():
            store.flush()

    # -- encoders: called only for texts no store holds -------------------------------------
    def _encode_heads(self, texts: list[str]) -> list[list[int]]:
        codec = self.codec
        if hasattr(codec, "head_text"):
            bos = list(codec.bos_head)
            return [bos + ids for ids in codec.encode_batch([codec.head_text(t) for t in texts])]
        return [codec.chat_split(t, "")[0] for t in texts]

    def _encode_tails(self, texts: list[str]) -> list[list[int]]:
        codec = self.codec
        if hasattr(codec, "tail_text"):
            return codec.encode_batch([codec.tail_text(t) for t in texts])
        return [codec.chat_split("", t)[1] for t in texts]

    def _encode_plain(self, texts: list[str]) -> list[list[int]]:
        codec = self.codec
        if hasattr(codec, "encode_batch"):
            return codec.encode_batch(texts)
        return codec.tokenize(texts)
