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
value is the mean of the two PMIs mapped onto the vendor's range through a logistic curve
(`similarity_value`), so it is the same whichever argument comes first, as the vendors' cosine
is: measured, it ranks paraphrases above unrelated texts where the yes/no "do these two texts
mean the same thing?" ranked them at chance (commit dc3bf20; bench/similarity.py;
tests/e2e/test_function_shapes.py checks the ranking and the symmetry). The numbers the SQL
compares a similarity with are its readout's `thresholds`, for the re-ask band, which decides on
the mean (exec/multi_request.py).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from quail_engine.exec.tasks import default_max_tokens, shape_text, task_grammar, task_prompt
from quail_engine.infer.api import (
    BooleanReadout,
    GenerateReadout,
    LabelReadout,
    Readout,
    ScoreReadout,
    SpanReadout,
    logit,
    sigmoid,
)
from quail_engine.infer.embedded import (
    DECODE_MODEL,
    DEFAULT_MODEL,
    EMBEDDED_REPETITION_PENALTY,
    is_embedded,
)
from quail_engine.infer.prompt_layout import (
    BOOLEAN_HINT,
    CONTENT_FREE,
    document_text,
    label_hint,
    pair_cue,
    pair_readout,
)
from quail_engine.sql import scales
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
# a similarity's PMI (nats, the mean of both directions') at the middle of its range, and the
# nats that move it by one logistic unit: chosen between the paraphrases and the unrelated texts
# of bench/data/similarity.jsonl on the embedded default model (python -m bench similarity), so
# related pairs land in the range's upper part and most unrelated ones below the middle
SIMILARITY_CENTRE = 4.0
SIMILARITY_SPREAD = 3.0


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
        directions (not one direction's, as it once was under the same prompt)."""
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


# shapes the embedded default model answers poorly whatever the layout (bench/pair_accuracy.py,
# examples/README.md): shape -> what the user is told once
WEAK_ON_DEFAULT = {
    "yes/no filter on one document": (
        "the default model's yes/no answer tracks whether the text reads positive, not the "
        "question asked ('Is this review negative?' was right on 15% of labelled reviews); ask "
        "for a label with a classify function, pass the topic as a second argument "
        "(ai_filter('Does {0} mention {1}?', review, 'battery life')), or use a larger --model"),
    "generation": (
        "the default model (a 270M base model) writes rambling text that often ignores the "
        "instruction; leave --generation-model at auto (the embedded smollm2-135m writes), "
        "or use a larger model"),
    "generation on the embedded writer": (
        "smollm2-135m (embedded, 135M parameters) writes short summaries well but free-form "
        "replies poorly (examples/README.md); pass --generation-model (dbt: generation_model) "
        "a larger model for text people will read"),
    "two-argument question that goes on after its second argument": (
        "the default model scores how strongly the document makes the second argument likely, "
        "and the words after the second argument's slot (e.g. 'is {1} cited by {0}') do not "
        "reach it, so the relation they name is not asked; end the question with the second "
        "argument, or use a larger --model"),
}

_TRAILING_NOISE = re.compile(r"^[\s?.!:;,'\")\]]*$")


def pair_layout_for(model_name: str) -> bool:
    """Whether two-argument questions use the pair layout with `model_name`'s answers: on the
    embedded default model, where it was measured (yes/no answers there are at chance on
    pairs: bench/results/pair-accuracy.md); elsewhere the yes/no readout every
    warehouse's AI_FILTER documents (one prefill, a few answer-token logits, no full-vocabulary
    span scoring and no threshold tuned on another model)."""
    return model_name.split("@")[0] in ("default", DEFAULT_MODEL)


def is_decoded(op) -> bool:
    """Whether operator `op` (an ir.AiOp) writes text (a decode), rather than reading an answer
    from one prefill's logits."""
    return spec(op.op).is_decoded


def repetition_penalty_for(model_name: str) -> float:
    """The repetition penalty of generated text on `model_name` (1.0: plain greedy): the
    embedded models repeat themselves without one; any other model decodes as it is."""
    return EMBEDDED_REPETITION_PENALTY if is_embedded(model_name) else 1.0


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
    name = model_id.split("@")[0]
    if shape is not None and name in ("default", DEFAULT_MODEL):
        _warn_once(shape)
    elif shape == "generation" and name == DECODE_MODEL:
        _warn_once("generation on the embedded writer")


@functools.cache
def _warn_once(shape: str) -> None:
    log.warning("%s: %s", shape, WEAK_ON_DEFAULT[shape])


def probability(op, value: float) -> float:
    """The P(yes) that is `value` in `op`'s SQL units (a score in LO..HI is LO + p (HI - LO):
    sql_value, sql/scales.py)."""
    lo, hi = scales.parse(dict(op.task_args).get("range"))
    return (value - lo) / (hi - lo)


def similarity_margin(op, value: float) -> float:
    """The span margin (PMI - centre, nats) at which `op`'s similarity equals `value` in its SQL
    range (`sql_value`'s curve inverted); a value at or past the range's ends is never a close
    call (+-inf)."""
    return SIMILARITY_SPREAD * logit(probability(op, value))


def similarity_value(op, margin: float) -> float:
    """`op`'s similarity in its SQL range at span margin `margin` (PMI - centre, nats; the mean
    of both directions' for a row): a logistic curve, SIMILARITY_SPREAD nats a unit."""
    lo, hi = scales.parse(dict(op.task_args).get("range"))
    return lo + sigmoid(margin / SIMILARITY_SPREAD) * (hi - lo)


def value_shape(op) -> tuple:
    """What `sql_value` reads of `op` besides the answer: the answer cache keeps SQL values,
    so two operators that ask the same prompt the same way but type the answer differently
    (AI.GENERATE_DOUBLE and ai_query's returnType FLOAT; a similarity in -1..1 and in 0..1)
    must not share them."""
    return (str(op.op), op.output_type, op.multi, dict(op.task_args).get("range"))


def sql_value(op, answer) -> object:
    """The SQL value of an engine Answer for `op`'s canonical output type."""
    if answer is None:
        return None
    value = answer.value
    kind = spec(op.op).readout
    if kind == "label" and op.multi:  # one label's decision (OpPrompt.decisions)
        return bool(value)
    if kind == "boolean":
        return bool(value)
    if kind == "score":
        if op.op == OpKind.AI_SIMILARITY:  # a span readout: its margin is PMI - centre
            return similarity_value(op, answer.margin)
        lo, hi = scales.parse(dict(op.task_args).get("range"))
        return lo + float(value) * (hi - lo)
    return shape_text(op, value if isinstance(value, str) or value is None else str(value))


def value_text(value: object) -> str:
    """A binding's text in a prompt: an aggregate's group (a list) as its texts one after
    another, blank-line apart, NULLs left out; NULL as nothing."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "\n\n".join(str(v) for v in value if v is not None)
    return str(value)
