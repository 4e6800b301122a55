"""The SQL value of an operator's answer, and the curves between its SQL units and the readout's.

A score in LO..HI is LO + p (HI - LO) for the readout's P(yes) (sql/scales.py). A similarity's
value is the mean of its two directions' PMIs mapped onto the vendor's range through a logistic
curve (`similarity_value`), so it is the same whichever argument comes first, as the vendors'
cosine is (exec/prompts.py asks the directions). The answer cache keeps these SQL values, keyed
by what they read of the operator (`value_shape`).
"""

from __future__ import annotations

from quail_engine.exec.tasks import shape_text
from quail_engine.infer.api import logit, sigmoid
from quail_engine.sql import scales
from quail_engine.sql.op_kinds import OpKind, spec

# a similarity's PMI (nats, the mean of both directions') at the middle of its range, and the
# nats that move it by one logistic unit: chosen between the paraphrases and the unrelated texts
# of bench/data/similarity.jsonl on the embedded default model (python -m bench similarity), so
# related pairs land in the range's upper part and most unrelated ones below the middle
SIMILARITY_CENTRE = 4.0
SIMILARITY_SPREAD = 3.0


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
