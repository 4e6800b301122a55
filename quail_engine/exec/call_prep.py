"""The host's part of an operator's call before the engine: its prompts, readout and cached
answers.

Rows are tuples of binding values. A NULL value gives a NULL answer without a prompt. Whether a
call takes the answers the cache holds is the plan's (PhysicalPlan.cached_answers, set on the
runner by the core it runs: plan/call_order.py). Answers are cached by text (the model's
identity, the rendered prompt, the readout and its calibration prompt), so looking them up
needs neither the model nor its tokenizer: a query whose answers are all cached loads nothing.
Prompt parts become token ids through the session's PromptText (each distinct document,
question and calibration text tokenized once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from operator import itemgetter

from quail_engine.exec.answer_cache import AnswerCache, AnswerKeys, text_digest
from quail_engine.exec.model_quirks import pair_layout_for, repetition_penalty_for
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.prompts import OpPrompt
from quail_engine.infer.api import LABEL_RULE, GenerateReadout, LabelReadout
from quail_engine.plan.call_order import REUSE_CACHED
from quail_engine.sql.op_kinds import spec


@dataclasses.dataclass
class CallPrep:
    """One call's host work before the engine (CallPreparer.prepare): each non-NULL row's prompt
    (document part, question part) and answer-cache key, the answers the cache held, the rows
    left to compute in run order and the count of rows with a NULL or blank argument."""
    rows: Sequence[Sequence[object]]
    texts: dict[int, tuple[str, str]]
    keys: dict[int, str]
    cached: dict[str, object]
    todo: list[int]
    nulls: int


class CallPreparer:
    """Prompts, readouts and answer-cache keys of operators for one model. `text`: the
    PromptText prompts are tokenized through. `calibrate`: calibrated yes/no readouts (each on
    its content-free prompt). `precision`: part of the answers' identity (fp8 answers are not
    bf16 answers)."""

    def __init__(self, cache: AnswerCache, text: PromptText, calibrate: bool = True,
                 precision: str = ""):
        self.cache, self.text = cache, text
        self.calibrate, self.precision = calibrate, precision
        self.cached_answers = REUSE_CACHED  # the plan's (plan/call_order.py), as the core sets it
        self._pair_layout: bool | None = None
        self._calibration: dict[tuple, list[int]] = {}

    def layout(self, op) -> OpPrompt:
        """The prompt layout of `op` for this model (exec/prompts.py)."""
        if self._pair_layout is None:
            self._pair_layout = pair_layout_for(self.text.model_name)
        return OpPrompt.for_op(op, self._pair_layout)

    def _calibration_texts(self, layout: OpPrompt) -> tuple[str, str] | None:
        if not self.calibrate or not spec(layout.op.op).is_calibrated or layout.partner_slots:
            return None  # a pair layout carries its own content-free reference
        if layout.per_label:  # one per label (readout): keyed by its form
            return layout.label_calibration("{label}")
        return layout.texts(layout.calibration_values())

    def cache_readout(self, layout: OpPrompt) -> str:
        """The readout as the answer cache keys it: its kind and labels, and the calibration
        prompt's text (not its token ids, which would need the tokenizer); a label readout's
        with the engine's label scoring rule, so answers scored by an earlier rule are not
        mixed with this one's in one table."""
        readout = self._model_readout(layout.readout())
        rule = (LABEL_RULE,) if isinstance(readout, LabelReadout) else ()
        return repr((readout, self._calibration_texts(layout), self.precision,
                     layout.value_shape(), *rule))

    def _model_readout(self, readout):
        """`readout` with what this model needs on it (a repetition penalty on the embedded
        models' generated text)."""
        if isinstance(readout, GenerateReadout):
            penalty = repetition_penalty_for(self.text.model_name)
            if penalty != readout.repetition_penalty:
                return dataclasses.replace(readout, repetition_penalty=penalty)
        return readout

    def readout(self, layout: OpPrompt):
        """The readout of `layout`'s requests; for yes/no label decisions, a dict from each
        label's question to its readout (each calibrated on its own content-free prompt)."""
        cal = self._calibration_texts(layout)
        if cal is None:
            return self._model_readout(layout.readout())
        if layout.per_label:
            return {layout.label_calibration(lb.name)[1]:
                    layout.readout(self._calibration_tokens(layout.label_calibration(lb.name)))
                    for lb in layout.op.labels or ()}
        return layout.readout(self._calibration_tokens(cal))

    def _calibration_tokens(self, cal: tuple[str, str]) -> list[int]:
        if cal not in self._calibration:
            head, tail = self.text.split(*cal)
            self._calibration[cal] = head + tail
        return self._calibration[cal]

    def prepare(self, layout: OpPrompt, rows: Sequence[Sequence[object]]) -> CallPrep:
        """The host's part of a call before the engine (CallPrep): prompts rendered, keys, the
        cached answers, the rows left in run order. Touches neither the engine nor the report,
        so a join prepares its next chunk of anchors on another thread while this one runs."""
        texts: dict[int, tuple[str, str]] = {}
        render = TextMemo(layout)
        nulls = 0
        for i, values in enumerate(rows):
            if layout.has_input(values):
                texts[i] = render(values)
            else:
                nulls += 1  # an empty argument is no input: NULL, not an answer about nothing
        keyer = AnswerKeys(self.text.identity, self.cache_readout(layout))
        digests: dict[str, bytes] = {}
        keys = {}
        for i, (p, s) in texts.items():
            digest = digests.get(p)
            if digest is None:
                digest = digests[p] = text_digest(p)
            keys[i] = keyer.key(digest, s)
        cached = self.cache.get_many(keys.values()) if self.cached_answers == REUSE_CACHED else {}
        todo = [i for i, key in keys.items() if key not in cached]
        todo.sort(key=texts.__getitem__)  # rows that begin alike run together (shared KV)
        return CallPrep(rows, texts, keys, cached, todo, nulls)

    def refreshed(self, prep: CallPrep) -> CallPrep:
        """`prep` with the answers the cache has gained since it was prepared (another call's
        in between: a join riding along another asks pairs the other may have just answered)
        among the cached; `prep` itself where the plan takes no cached answers."""
        if not prep.todo or self.cached_answers != REUSE_CACHED:
            return prep
        gained = self.cache.get_many(prep.keys[i] for i in prep.todo)
        if not gained:
            return prep
        todo = [i for i in prep.todo if prep.keys[i] not in gained]
        return CallPrep(prep.rows, prep.texts, prep.keys, {**prep.cached, **gained}, todo,
                        prep.nulls)


def picker(index: list[int]):
    """values -> the tuple of values[i] for i in `index` (an itemgetter: C speed)."""
    if len(index) > 1:
        return itemgetter(*index)
    if index:
        i = index[0]
        return lambda values: (values[i],)
    return lambda values: ()


class TextMemo:
    """`layout.texts(values)` with each distinct document and each distinct question rendered
    once: a shared layout's prefix depends only on its document slots' values and its suffix
    only on the others (exec/prompts.py), so a join renders each anchor once, not per pair."""

    def __init__(self, layout: OpPrompt):
        self.layout = layout
        self.slots = set(layout.doc_slots)
        self.prefixes: dict[tuple, str] = {}
        self.suffixes: dict[tuple, str] = {}
        self._parts = None  # (arity, its document slots' picker, the others')

    def _split(self, n: int):
        return (n, picker([i for i in range(n) if i in self.slots]),
                picker([i for i in range(n) if i not in self.slots]))

    def __call__(self, values: Sequence[object]) -> tuple[str, str]:
        if not self.slots:
            key = tuple(values)
            text = self.prefixes.get(key)
            if text is None:
                text = self.prefixes[key] = self.layout.texts(values)[0]
            return text, ""
        if self._parts is None or self._parts[0] != len(values):
            self._parts = self._split(len(values))
        doc, rest = self._parts[1](values), self._parts[2](values)
        prefix, suffix = self.prefixes.get(doc), self.suffixes.get(rest)
        if prefix is None or suffix is None:
            # the document's first string object kept: rows of one anchor then share it, and
            # sorting or hashing them compares by identity, not by thousands of characters
            p, q = self.layout.texts(values)
            prefix = self.prefixes.setdefault(doc, p)
            suffix = self.suffixes.setdefault(rest, q)
        return prefix, suffix
