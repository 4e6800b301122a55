"""Resident document KV for one plan step group: prefix text -> engine prefix handle.

The executor opens one DocKV per document the plan shares (a relation's column read by several
predicates, or a join's anchor side) and releases it exactly when the plan says no later step
reads it.
"""

from __future__ import annotations

from collections.abc import Sequence

from quail_engine.errors import ExecutionError
from quail_engine.infer.api import PrefixHandle
from quail_engine.plan.cost import Work, request_work

# resident documents extended by a question stem per engine call (DocKV._extend) where the KV
# store copies a document to extend it (the CPU's); a paged arena shares the document's whole
# pages and copies only its last partial one, so there a whole chunk of anchors goes in one
# pass (each extension pass costs host time the GPU waits for)
EXTEND_BATCH = 256
EXTEND_BATCH_PAGED = 1024


def _paged_arena(engine) -> tuple[int, int] | None:
    """(pages, tokens a page) of the engine's paged KV arena (the GPU's), None where there is
    none (the CPU engine's store is unbounded; a remote engine's is unknown)."""
    arena = getattr(getattr(engine, "model", None), "arena", None)
    pages, size = getattr(arena, "num_pages", None), getattr(arena, "page_size", None)
    return (pages, size) if isinstance(pages, int) and isinstance(size, int) else None


def kv_capacity_tokens(engine) -> int | None:
    """Tokens the engine's KV arena holds (the GPU's paged arena), None where unbounded (the CPU
    engine) or unknown (a remote engine)."""
    paged = _paged_arena(engine)
    return paged[0] * paged[1] if paged else None


def kv_page_tokens(engine) -> int:
    """Tokens of one page of the engine's paged KV arena, 0 without one."""
    paged = _paged_arena(engine)
    return paged[1] if paged else 0


class DocKV:
    """`engine`: the engine, or a callable returning it (so that opening a DocKV loads no
    model). `reserve`: tokens of the context kept free for the question."""

    def __init__(self, engine, reserve: int | None = None, on_long: str = "truncate",
                 text=None, private: bool = False):
        from quail_engine.exec.prompt_text import PromptText  # (deferred: pyarrow; else light)

        self._engine = engine
        self.text = text if text is not None else PromptText.of_engine(lambda: self.engine)
        self.reserve = reserve
        self.on_long = on_long
        self.handles: dict[str, PrefixHandle] = {}
        self.heads: dict[str, list[int]] = {}
        self.truncated = 0
        self.work = Work()  # encoding work not yet claimed by a report
        # `private`: one operator's alone (a join chunk's anchors), so its prefixes may run on
        # past the document into the question's first tokens (`stem`, the same for every row)
        self.private = private
        self.stem: list[int] = []
        # documents not resident are encoded into `source` (which keeps them for a later reader:
        # a star's next join) and held from there, instead of here alone
        self.source: DocKV | None = None

    def set_stem(self, stem: list[int]) -> bool:
        """Append `stem` to every document this DocKV encodes from now: the token ids every
        question of the operator starts with, computed once per document instead of once per
        row. Only a private DocKV takes one, once, with nothing tokenized yet or every
        document tokenized resident: documents taken from another DocKV (a join's anchors as
        the filters left them) are extended by the stem where the engine can
        (`extend_prefixes`). Returns whether it did."""
        if not self.private or self.stem or not stem:
            return False
        extends = getattr(self.engine, "extends_prefixes", False)
        if self.source is not None and not extends:
            return False  # documents arriving from the source could not take it
        if self.handles:
            if set(self.heads) != set(self.handles) or not extends:
                return False
            limit = self.max_tokens
            if limit is not None and max(map(len, self.heads.values())) + len(stem) > limit:
                return False  # a document cut to the context without room for it
            self._extend(list(stem))
        elif self.heads:
            return False
        self.stem = list(stem)
        return True

    def _extend(self, stem: list[int], texts: Sequence[str] | None = None) -> None:
        """Each resident document's KV (of `texts`, default all) followed by `stem`'s,
        replacing it; EXTEND_BATCH (a paged arena: EXTEND_BATCH_PAGED) at a time, each original
        released once its extension exists (the arena holds both for those only)."""
        texts = list(self.handles) if texts is None else list(texts)
        step = EXTEND_BATCH if kv_capacity_tokens(self.engine) is None else EXTEND_BATCH_PAGED
        for lo in range(0, len(texts), step):
            batch = texts[lo:lo + step]
            new = self.engine.extend_prefixes([self.handles[t] for t in batch], stem)
            for text, handle in zip(batch, new):
                self.engine.release(self.handles[text])
                self.handles[text] = handle
            for handle in new:  # the stem's tokens over the document's, their KV kept
                self.work = (self.work + request_work(handle.num_tokens - len(stem), len(stem),
                                                      False) + Work(kv_writes=len(stem)))

    @property
    def engine(self):
        return self._engine() if callable(self._engine) else self._engine

    @property
    def max_tokens(self) -> int | None:
        return None if self.reserve is None else max(16, self.engine.max_context - self.reserve)

    def head(self, prefix_text: str) -> list[int]:
        """Token ids of the chat header + document (cut to `max_tokens`, beginning kept)."""
        if prefix_text not in self.heads:
            self._cut(prefix_text, self.text.heads([prefix_text])[0])
        return self.heads[prefix_text]

    def _cut(self, prefix_text: str, head: list[int]) -> None:
        max_tokens = self.max_tokens
        if max_tokens is not None:
            max_tokens = max(16, max_tokens - len(self.stem))
        if max_tokens is not None and len(head) > max_tokens:
            if self.on_long == "error":
                raise ExecutionError(
                    f"a document of {len(head)} tokens exceeds the model's context of "
                    f"{self.engine.max_context} tokens less "
                    f"{self.engine.max_context - max_tokens} for the question "
                    f"(on_long='error'): {prefix_text[:80]!r}...")
            head = head[:max_tokens]
            self.truncated += 1
        self.heads[prefix_text] = head

    def ensure(self, prefix_texts: Sequence[str]) -> None:
        """Encode every document not yet resident (several per forward pass when possible)."""
        todo = [t for t in dict.fromkeys(prefix_texts) if t not in self.handles]
        if not todo:
            return
        if self.source is not None:
            self.source.ensure(todo)
            self.work = self.work + self.source.take_work()
            self.share(self.source, todo)
            if self.stem:
                self._extend(self.stem, todo)
            return
        self.tokenize(todo)
        token_lists = [self.heads[t] + self.stem for t in todo]
        if hasattr(self.engine, "add_prefixes"):
            handles = self.engine.add_prefixes(token_lists)
        else:
            handles = [self.engine.add_prefix(t) for t in token_lists]
        for text, handle in zip(todo, handles):
            self.handles[text] = handle
            self.work = self.work + request_work(handle.num_tokens, 0, True)

    def tokenize(self, prefix_texts: Sequence[str]) -> None:
        """Token ids (cut to the context) of every document not yet known, in one batch."""
        new = [t for t in dict.fromkeys(prefix_texts) if t not in self.heads]
        if new:
            for text, head in zip(new, self.text.heads(new)):
                self._cut(text, head)

    def take_work(self) -> Work:
        work, self.work = self.work, Work()
        return work

    def get(self, prefix_text: str) -> PrefixHandle:
        return self.handles[prefix_text]

    def take(self, other: DocKV, prefix_texts) -> None:
        """Move the resident documents `prefix_texts` of `other` into this one (no copy)."""
        for text in prefix_texts:
            handle = other.handles.pop(text, None)
            if handle is None:
                continue
            if text in self.handles:
                self.engine.release(handle)
            else:
                self.handles[text] = handle
                self.heads[text] = other.heads.get(text) or self.head(text)

    def share(self, other: DocKV, prefix_texts) -> None:
        """Hold the resident documents `prefix_texts` of `other` too (one more reference each,
        no copy): both release them on their own (a star's joins reading one carried anchor
        document each in turn). The others are encoded into `other` when first needed."""
        self.source = other
        for text in prefix_texts:
            handle = other.handles.get(text)
            if handle is None or text in self.handles:
                continue
            self.engine.retain(handle)
            self.handles[text] = handle
            self.heads[text] = other.heads.get(text) or self.head(text)

    def release(self, prefix_texts: Sequence[str] | None = None) -> None:
        texts = list(self.handles) if prefix_texts is None else list(prefix_texts)
        for text in texts:
            handle = self.handles.pop(text, None)
            if handle is not None:
                self.engine.release(handle)

    def resident_tokens(self) -> int:
        return sum(h.num_tokens for h in self.handles.values())

    def __len__(self) -> int:
        return len(self.handles)
