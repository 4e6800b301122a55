"""Helpers the emitters share: literals, prompt spellings, refusals and warnings."""

from __future__ import annotations

import importlib
import json
import logging

from sqlglot import exp

from quail_engine.errors import QUOTE_LIMIT, shorten
from quail_engine.sql.errors import UnsupportedError
from quail_engine.sql.ir import AiOp
from quail_engine.sql.prompt import template_parts
from quail_engine.sql.task_prompts import SCORE_RUBRICS, TASKS, fill

log = logging.getLogger("quail_engine.sql.transpile")

def lit(value: str, dialect: str) -> str:
    return exp.Literal.string(value).sql(dialect=dialect)


def parts(op: AiOp, args: list[str], dialect: str, prefix: str = "") -> list[str]:
    """The prompt as a list of SQL pieces (quoted literals and argument SQL), in order. The
    `prefix` (task text built from user values) is literal text, never placeholders."""
    pieces = template_parts(op.template)
    if prefix and pieces and isinstance(pieces[0], str):
        pieces[0] = prefix + pieces[0]
    elif prefix:
        pieces.insert(0, prefix)
    out = [args[part] if isinstance(part, int) else lit(part, dialect) for part in pieces]
    return out or [lit("", dialect)]


def single(op: AiOp, args: list[str], dialect: str, prefix: str = "") -> str | None:
    """The prompt as one expression when it is one slot or one literal, else None."""
    pieces = parts(op, args, dialect, prefix)
    return pieces[0] if len(pieces) == 1 else None


def concat(op: AiOp, args: list[str], dialect: str, prefix: str = "") -> str:
    return single(op, args, dialect, prefix) or (
        f"CONCAT({', '.join(parts(op, args, dialect, prefix))})")


def task_prefix(op: AiOp) -> str:
    """Instruction text that spells a task function as a plain prompt: the engine's wording of
    the task up to the text (sql/task_prompts.py), or a score's rubric."""
    if op.task in SCORE_RUBRICS:
        return SCORE_RUBRICS[op.task]
    if op.task not in TASKS:
        return ""
    return fill(TASKS[op.task].partition("{text}")[0], op, "")


def dispatch(emitters: dict, op: AiOp, args: list[str], target: str) -> str:
    """`op` in `target`'s spelling: its kind's entry of the dialect's `emitters` table; a kind
    the table lacks has no spelling there and is refused, naming the kind. The tables are
    filled when quail_engine.sql.functions is imported, here first."""
    importlib.import_module("quail_engine.sql.functions")
    emitter = emitters.get(op.op)
    if emitter is None:
        raise refuse(str(op.op), target, f"{target} has no function for it", op)
    return emitter(op, args)


def refuse(fn: str, target: str, why: str, op: AiOp) -> UnsupportedError:
    return UnsupportedError(f"{fn} cannot be written in {target}: {why}", op.origin or None,
                            target)


def warn(fn: str, target: str, difference: str) -> None:
    """One line, whatever the size of the values it names (a 5 MB literal stays short)."""
    log.warning("%s -> %s: %s", shorten(fn, 80), target, shorten(difference, QUOTE_LIMIT))


def labels_json(op: AiOp) -> str:
    if any(lb.description for lb in op.labels or ()):
        return json.dumps({lb.name: lb.description or "" for lb in op.labels})
    return json.dumps([lb.name for lb in op.labels or ()])


def similarity_range(op: AiOp) -> str:
    return dict(op.task_args).get("range", "-1..1")


def example_outputs(op: AiOp) -> list[tuple[str, object]]:
    """The call's few-shot examples as (input, output) with the output decoded: a bool (a
    filter), a label or a list of labels (a classification)."""
    return [(text, json.loads(output)) for text, output in op.examples]


def drop_examples(fn: str, target: str, op: AiOp) -> None:
    """Warn that `target`'s `fn` has no few-shot examples, when the call gives some."""
    if op.examples:
        warn(fn, target, f"{fn} takes no examples; the call's {len(op.examples)} are dropped")


def refuse_aspects(fn: str, target: str, op: AiOp) -> None:
    """Refuse a sentiment per aspect (Snowflake's AI_SENTIMENT(text, categories)) where the
    target's sentiment function answers the overall sentiment alone."""
    if "aspects" in dict(op.task_args):
        raise refuse(fn, target, f"{target} has no sentiment per aspect (categories); write one "
                     "classification per aspect", op)
