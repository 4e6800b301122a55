"""Prompt layout of one AI operator: the document first (a shareable prefix), the question after.

For filters, joins, classify and score the document part - the values of the anchor's bindings -
is the prefix, so its KV is computed once and reused by every question over the same document
(and by every join partner). The question part is the template with the document slots replaced
by a reference to the text above, plus the answer instruction. Generative operators keep the
template as written (one user turn, nothing shared). The content-free calibration prompt is the
same layout with "N/A" as every value.

A boolean question with a partner - a join's other side, or a string literal argument of a filter
(`ai_filter('Does {0} mention {1}?', review, 'battery life')`) - is a pair layout: the partner is
read as the answer after the template's text up to its slot, and the readout is how much the
document raises the partner's likelihood over the content-free document (infer/prompt_layout.py, measured
in bench/pair_accuracy.py). The partner stays in the suffix, so the document is still the prefix.

A multi-label classification is one decision per label over the document (`OpPrompt.decisions`):
each row is asked once per label, the label appended to its values as the partner, so the
document's KV is computed once and every label's decision is a short suffix on it, cached by
itself. On the embedded default model the decision is the label's likelihood after "Does the
text above mention" against `MULTI_LABEL_THRESHOLD` (its yes/no answer ranks labels below chance:
bench/results/multilabel.md); on any other model, the yes/no question per label.

A similarity is a pair layout on every model, asked in both directions (`OpPrompt.directions`):
each text read as the answer to "write a text that means the same" after the other, its PMI with
the other (the nats the other text adds to its likelihood over the content-free document). The
value is the mean of the two PMIs mapped onto the vendor's range (exec/sql_values.py): measured,
it ranks paraphrases above unrelated texts where the yes/no "do these two texts mean the same
thing?" ranked them at chance (bench/similarity.py; tests/e2e/test_function_shapes.py checks the
ranking and the symmetry). The numbers the SQL compares a similarity with are its readout's
`thresholds`, for the re-ask band, which decides on the mean (exec/multi_request.py).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from quail_engine.exec.model_quirks import WEAK_ON_DEFAULT, is_default_model
from quail_engine.exec.sql_values import (
    SIMILARITY_CENTRE,
    probability,
    similarity_margin,
    sql_value,
    value_shape,
)
from quail_engine.exec.tasks import default_max_tokens, task_grammar, task_prompt
from quail_engine.infer.api import (
    BooleanReadout,
    GenerateReadout,
    LabelReadout,
    Readout,
    ScoreReadout,
    SpanReadout,
)
from quail_engine.infer.embedded import DECODE_MODEL
from quail_engine.infer.prompt_layout import (
    BOOLEAN_HINT,
    CONTENT_FREE,
    document_text,
    label_hint,
    pair_cue,
    pair_readout,
)
from quail_engine.sql.op_kinds import OpKind, kinds, spec
from quail_engine.sql.scan import is_string_literal
from quail_engine.sql.task_prompts import SIMILARITY_STEM
from quail_engine.sql.task_prompts import question as task_question

log = logging.getLogger(__name__)
SLOT = re.compile(r"\{(\d+)\}")
DOC_REF = "(see the text above)"
DEFAULT_MAX_TOKENS = 48
DECODED = kinds(is_decoded=True)  # operators whose answer is a decode
LABEL_STEM = "Does the text above mention"  # a label decision in the pair layout
# nats a label's likelihood must gain from the document; chosen on the odd ids of
# bench/data/multilabel.jsonl, reported on the even ids (python -m bench multilabel)
MULTI_LABEL_THRESHOLD = 2.75


@dataclass(frozen=True)
class OpPrompt:
    """Layout of operator `op` (an ir.AiOp) with the bindings in `doc_slots` as the document."""

    op: object
    doc_slots: tuple[int, ...]
    pair: bool = True  # two-argument questions in the pair layout (else yes/no)
    per_label: bool = False  # one decision of a multi-label op: the row's last value a label
    per_direction: bool = False  # one direction of a similarity: the value is its PMI margin

    @classmethod
    def for_op(cls, op, pair: bool = True) -> OpPrompt:
        """The layout of `op`, a function of the SQL alone: the plan never changes what the
        model reads. An AI join's document is its first argument's relation (`op.aliases[0]`),
        whichever side the plan iterates (the planner anchors its joins there: the document is
        what a prefix shares); other operators read all their bindings as the document, but a
        filter's string literals, which are its partner. `pair`: two-argument questions read
        the partner as a span (`pair_layout_for` says for which models); False asks them
        yes/no, the partner inline in the question."""
        kind = spec(op.op)
        if not kind.shares_document:
            return cls(op, (), pair)
        if op.op == OpKind.AI_JOIN and op.aliases:
            return cls.with_document(op, op.aliases[0], pair)
        partner = _filter_partner(op) if kind.reads_partner and pair else set()
        slots = tuple(b.index for b in op.bindings if b.index not in partner)
        return cls(op, slots or tuple(b.index for b in op.bindings), pair)

    @classmethod
    def with_document(cls, op, alias: str, pair: bool = True) -> OpPrompt:
        """`op` laid out with relation `alias`'s bindings as the document: for_op's choice for
        a join; another alias only where a measurement compares both sides
        (bench/pair_accuracy.py)."""
        return cls(op, tuple(b.index for b in op.bindings if b.alias == alias), pair)

    @property
    def is_shared(self) -> bool:
        return bool(self.doc_slots)

    @property
    def is_multi_label(self) -> bool:
        """Whether rows of this layout are answered as one decision per label (`decisions`)."""
        return spec(self.op.op).readout == "label" and self.op.multi and not self.per_label

    def decisions(self) -> OpPrompt:
        """The layout of a multi-label op's decisions: rows are its rows with one of its label
        names appended; the answer is whether that label applies."""
        return dataclasses.replace(self, per_label=True)

    @property
    def is_similarity(self) -> bool:
        """Whether rows of this layout are answered as two directions (`directions`)."""
        return self.op.op == OpKind.AI_SIMILARITY and not self.per_direction

    def directions(self) -> OpPrompt:
        """The layout of one direction of a similarity: rows are its rows (the second text
        read after the first) and its rows `swapped` (the first after the second); the answer
        is that direction's PMI less the centre (`sql_value`), whatever the SQL range."""
        return dataclasses.replace(self, per_direction=True)

    def swapped(self, values: Sequence[object]) -> tuple[object, ...]:
        """A similarity row's values with its two texts exchanged: the other direction."""
        first, second = self._similarity_slots()
        out = list(values)
        out[first], out[second] = values[second], values[first]
        return tuple(out)

    def _similarity_slots(self) -> tuple[int, int]:
        """The slots of a similarity's first and second text, in template order
        (`AI_SIMILARITY(x, x)` binds one slot twice)."""
        slots = [int(m.group(1)) for m in SLOT.finditer(self.op.template)]
        return slots[0], slots[-1]

    def sql_value(self, answer) -> object:
        """The value the answer cache keeps for an answer in this layout: one direction's PMI
        margin, else the operator's SQL value."""
        if self.per_direction:
            return None if answer is None else float(answer.margin)
        return sql_value(self.op, answer)

    def value_shape(self) -> tuple:
        """`value_shape` of this layout's cached values: one direction's PMI is the same
        whatever range the SQL maps the mean onto; a similarity's value is the mean of both
        directions, so a value cached as one direction's cannot answer it under the same
        prompt."""
        if self.per_direction:
            return ("similarity pmi",)
        if self.is_similarity:
            return (*value_shape(self.op), "mean of both directions")
        return value_shape(self.op)

    @property
    def partner_slots(self) -> tuple[int, ...]:
        """Slots of a pair layout's partner, in template order (empty: not a pair layout)."""
        if self.per_label:
            return (len(self.op.bindings),) if self.pair else ()
        if not self.pair or not spec(self.op.op).reads_partner or not self.doc_slots:
            return ()
        seen = dict.fromkeys(int(m.group(1)) for m in SLOT.finditer(self.op.template))
        return tuple(i for i in seen if i not in self.doc_slots and i < len(self.op.bindings))

    def has_input(self, values: Sequence[object]) -> bool:
        """Whether a row is something to ask about: no NULL or blank (empty or whitespace-only)
        value, and a template that is not blank itself. A string literal argument is folded
        into the template rather than bound (`AI_FILTER('')` has the template '' and no
        bindings), so a blank template is a blank argument: NULL, as a blank value is."""
        if not self.op.template.strip() or None in values:
            return False
        return not any(isinstance(v, (str, list, tuple)) and not value_text(v).strip()
                       for v in values)

    def texts(self, values: Sequence[object]) -> tuple[str, str]:
        """(prefix_text, suffix_text) of one row; their concatenation is the user turn."""
        vals = [value_text(v) for v in values]
        if self.op.op == OpKind.AI_SIMILARITY:
            return self._similarity_text(vals), ""
        if not self.is_shared:
            return task_prompt(self.op, _render(self.op.template, vals, ())), ""
        doc = "\n\n".join(vals[i] for i in self.doc_slots)
        if self.per_label:
            return document_text(doc), self._label_question(vals[-1])
        if self.partner_slots:
            return document_text(doc), f"{self._cue()} {self._partner(vals)}"
        question = _render(self.op.template, vals, self.doc_slots).strip()
        if question == DOC_REF:  # the template is the document alone: ask the task's question
            question = task_question(self.op.task, spec(self.op.op).readout)
        if self.op.instruction:
            question = f"{self.op.instruction}\n{question}"
        # the layout measured on the development set (infer/prompt_layout.py, bench/accuracy.py)
        return document_text(doc), f"Question: {question}\n{self._instruction()}"

    def _similarity_text(self, values: Sequence[str]) -> str:
        """One direction's prompt: the first text as the document, the second read after the
        stem (`swapped` values give the other direction)."""
        first, second = self._similarity_slots()
        return f"{document_text(values[first])}{pair_cue(SIMILARITY_STEM)} {values[second]}"

    def _label_question(self, label: str) -> str:
        """The suffix asking whether `label` applies: the label read after the stem (pair), or
        a yes/no question."""
        if self.pair:
            return f"{self._label_cue()} {label}"
        lead = f"{self.op.instruction}\n" if self.op.instruction else ""
        return (f"Question: {lead}Does the label '{label}' apply to the text above?\n"
                f"{BOOLEAN_HINT}")

    def _label_cue(self) -> str:
        """A label decision's question before the label, in the pair layout."""
        lead = f"{self.op.instruction}\n" if self.op.instruction else ""
        return pair_cue(lead + LABEL_STEM)

    def label_calibration(self, label: str) -> tuple[str, str]:
        """A yes/no label decision's content-free prompt (its calibration), per label."""
        return document_text(CONTENT_FREE), self._label_question(label)

    def _partner_span(self) -> tuple[int, int]:
        """Character range of the template from the first partner slot to the end of the last."""
        spans = [m.span() for m in SLOT.finditer(self.op.template)
                 if int(m.group(1)) in self.partner_slots]
        return spans[0][0], spans[-1][1]

    def _cue(self) -> str:
        """A pair layout's suffix before the partner: the template up to the partner's slot."""
        stem = _render(self.op.template[:self._partner_span()[0]], (), self.doc_slots).strip()
        if self.op.instruction:
            stem = f"{self.op.instruction}\n{stem}"
        return pair_cue(stem)

    def _partner(self, values: Sequence[str]) -> str:
        start, end = self._partner_span()
        return _render(self.op.template[start:end], values, self.doc_slots).strip()

    def _instruction(self) -> str:
        if spec(self.op.op).readout == "label":
            return label_hint([lb.name for lb in (self.op.labels or ())])
        return BOOLEAN_HINT

    def readout(self, calibration_tokens: Sequence[int] | None = None) -> Readout:
        cal = tuple(calibration_tokens) if calibration_tokens is not None else None
        kind = spec(self.op.op).readout
        if self.per_label and self.pair:
            return SpanReadout(self._label_cue(), MULTI_LABEL_THRESHOLD,
                               document_text(CONTENT_FREE))
        if self.per_label:
            return BooleanReadout(calibration_tokens=cal)
        if self.op.op == OpKind.AI_SIMILARITY:
            # the mean's cut points are the SQL's numbers; a direction alone is a value the
            # band never decides on (the mean of both is what the SQL compares)
            cuts = () if self.per_direction else tuple(
                similarity_margin(self.op, t) for t in self.op.thresholds)
            return SpanReadout(pair_cue(SIMILARITY_STEM), SIMILARITY_CENTRE,
                               document_text(CONTENT_FREE), thresholds=cuts)
        if self.partner_slots:  # compares with the content-free document by definition
            return pair_readout(self._cue())
        if kind == "boolean":
            return BooleanReadout(calibration_tokens=cal)
        if kind == "score":
            return ScoreReadout(calibration_tokens=cal, thresholds=tuple(
                probability(self.op, t) for t in self.op.thresholds))
        if kind == "label":
            return LabelReadout(tuple(lb.name for lb in (self.op.labels or ())),
                                calibration_tokens=cal)
        gen = self.op.options.gen
        return GenerateReadout(
            max_tokens=gen.max_tokens or default_max_tokens(self.op, DEFAULT_MAX_TOKENS),
            stop=gen.stop, grammar=task_grammar(self.op))

    def calibration_values(self) -> list[str]:
        return ["N/A"] * len(self.op.bindings)


def _filter_partner(op) -> set[int]:
    """A filter's partner slots: its string literal arguments, else the slot that ends the
    question when another binding precedes it ('Does {0} mention {1}?'); none when every slot
    comes before the question ('Title: {0} Body: {1} Is it spam?' asks about one document)."""
    literals = {b.index for b in op.bindings if is_string_literal(b)}
    if literals or len(op.bindings) < 2:
        return literals
    last = list(SLOT.finditer(op.template))[-1:]
    if not last or op.template[last[0].end():].strip(" ?.!\"')"):
        return set()
    index = int(last[0].group(1))
    if list(SLOT.finditer(op.template))[0].group(1) == last[0].group(1):
        return set()
    return {index}


def _render(template: str, values: Sequence[str], doc_slots: Sequence[int]) -> str:
    def fill(m: re.Match) -> str:
        i = int(m.group(1))
        if i in doc_slots:
            return DOC_REF
        return values[i] if i < len(values) else m.group(0)

    return SLOT.sub(fill, template)


def is_decoded(op) -> bool:
    """Whether operator `op` (an ir.AiOp) writes text (a decode), rather than reading an answer
    from one prefill's logits."""
    return spec(op.op).is_decoded


_TRAILING_NOISE = re.compile(r"^[\s?.!:;,'\")\]]*$")


def weak_shape(op, layout: OpPrompt | None = None) -> str | None:
    """The WEAK_ON_DEFAULT shape of operator `op` (an ir.AiOp) asked in `layout` (default:
    its layout without an anchor), or None."""
    if spec(op.op).readout == "text":
        return "generation"
    layout = layout or OpPrompt.for_op(op)
    if layout.per_label:
        return None
    if op.op in (OpKind.AI_FILTER, OpKind.AI_SCORE) and not layout.partner_slots:
        return "yes/no filter on one document"
    if layout.partner_slots and not _TRAILING_NOISE.match(
            op.template[layout._partner_span()[1]:]):
        return "two-argument question that goes on after its second argument"
    return None


def warn_if_weak(op, model_id: str, layout: OpPrompt | None = None) -> None:
    """Log a warning, once per shape and process, when `op` (in `layout`) has a shape the
    embedded default model answers poorly and `model_id` names that model."""
    shape = weak_shape(op, layout)
    if shape is not None and is_default_model(model_id):
        _warn_once(shape)
    elif shape == "generation" and model_id.split("@")[0] == DECODE_MODEL:
        _warn_once("generation on the embedded writer")


@functools.cache
def _warn_once(shape: str) -> None:
    log.warning("%s: %s", shape, WEAK_ON_DEFAULT[shape])


def value_text(value: object) -> str:
    """A binding's text in a prompt: an aggregate's group (a list) as its texts one after
    another, blank-line apart, NULLs left out; NULL as nothing."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "\n\n".join(str(v) for v in value if v is not None)
    return str(value)
