"""Generative task prompts and answer shaping for the operators that are not a yes/no or label
readout: summarize, translate, fix_grammar, mask, extract, aggregate, similarity, token counts.

The SQL front end lowers e.g. `ai_summarize(x, 10)` to template "{0}" with task="summarize" and
task_args max_words=10; this module turns that into the instruction the model sees. A structured
answer (extraction, a response format, typed generation) is decoded under its JSON schema
(sql/response_schema.py), so its text parses; one the model did not complete within its
tokens is NULL.
"""

from __future__ import annotations

import functools
import json

from quail_engine.errors import UnsupportedError
from quail_engine.infer.api import Grammar
from quail_engine.sql.op_kinds import spec
from quail_engine.sql.response_schema import json_schema

STRUCTURED_MAX_TOKENS = 128  # an object's fields, when the SQL sets no max_tokens


@functools.lru_cache(maxsize=256)
def _schema(op) -> dict | None:
    """`op`'s answer schema (read once per operator; not to be modified)."""
    return json_schema(op)


@functools.lru_cache(maxsize=256)
def _schema_text(op) -> str | None:
    schema = _schema(op)
    return None if schema is None else json.dumps(schema, sort_keys=True)


def task_grammar(op) -> Grammar | None:
    """The grammar `op`'s generated answer is decoded under, or None for free text."""
    text = _schema_text(op)
    return None if text is None else Grammar(text)


def default_max_tokens(op, free_text: int) -> int:
    """Tokens an answer may take when the SQL does not say: an object needs more than a
    sentence."""
    schema = _schema(op)
    return STRUCTURED_MAX_TOKENS if schema and schema.get("type") == "object" else free_text


def _args(op) -> dict[str, str]:
    return dict(op.task_args)


def task_prompt(op, rendered: str) -> str:
    """The user turn for a generative operator given its rendered template."""
    args = _args(op)
    task = op.task
    if op.op == "ai_extract":
        names = [(lb.name, lb.description or lb.name) for lb in op.labels or ()] or [
            (name, name) for name in (_schema(op) or {}).get("properties", {})]
        fields = "; ".join(f'"{name}": {question}' for name, question in names)
        return (f"{rendered}\n\nExtract from the text above a JSON object with these keys: "
                f"{fields}. Use null for a key the text does not answer. Reply with the JSON "
                "object only.")
    if op.op == "ai_aggregate":
        return f"{op.instruction or 'Summarize these texts.'}\n\nTexts: {rendered}"
    if op.op == "ai_similarity":
        parts = rendered.split("\n", 1)
        return (f"Text 1: {parts[0]}\nText 2: {parts[1] if len(parts) > 1 else ''}\n"
                "Do these two texts mean the same thing? Answer yes or no.")
    if task == "summarize":
        limit = args.get("max_words")
        words = f" in at most {limit} words" if limit and limit != "0" else ""
        return f"Summarize the following text{words}:\n\n{rendered}"
    if task == "translate":
        src = args.get("source_language")
        source = f" from {src}" if src else ""
        return (f"Translate the following text{source} to {args.get('target_language', 'en')}. "
                f"Reply with the translation only:\n\n{rendered}")
    if task == "fix_grammar":
        return f"Correct the grammar of the following text. Reply with the text only:\n\n{rendered}"
    if task == "mask":
        kinds = ", ".join(lb.name for lb in op.labels or ()) or "personal information"
        return (f"Rewrite the following text replacing every {kinds} with [MASKED]. Reply with "
                f"the text only:\n\n{rendered}")
    if task in ("extract_answer", "qa"):
        return f"{rendered}\n\nAnswer briefly from the text above."
    if op.instruction:
        return f"{op.instruction}\n\n{rendered}"
    return rendered + _format_hint(op)


def _format_hint(op) -> str:
    """What a generated answer with a response format must look like, said in the prompt (the
    grammar enforces it; a model told it answers better than one only forced)."""
    schema = _schema(op)
    if schema is None:
        return ""
    kind = schema.get("type")
    if kind == "integer":
        return "\n\nReply with a whole number only."
    if kind == "number":
        return "\n\nReply with a number only."
    if kind == "boolean":
        return "\n\nReply with true or false only."
    return f"\n\nReply with JSON matching this schema only: {_schema_text(op)}"


def shape_text(op, text: str | None) -> object:
    """A decoded answer as the operator's SQL value: a structured answer's JSON parsed and
    typed (an incomplete one, None, is NULL), free text stripped; a summary with a word
    limit (`ai_summarize(x, 10)`) cut to it, as the vendor's limit is a cap the model's
    instruction alone does not keep."""
    if _schema_text(op) is None:
        if text is None:
            return None
        limit = int(_args(op).get("max_words") or 0) if op.task == "summarize" else 0
        return " ".join(text.split()[:limit]) if limit else text.strip()
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:  # the grammar completed it, so only a grammar defect lands here
        return None
    kind = (op.output_type or "").upper()
    if kind == "BIGINT":
        return int(value) if isinstance(value, int | float) else None
    if kind == "DOUBLE":
        return float(value) if isinstance(value, int | float) else None
    if kind == "BOOLEAN":
        return value if isinstance(value, bool) else None
    return json.dumps(value)


def check_supported(op) -> None:
    """Refuse an operator whose kind the local engine cannot answer (op_kinds.OpSpec.refusal)."""
    refusal = spec(op.op).refusal
    if refusal is not None:
        raise UnsupportedError(f"{op.op} is not supported: {refusal}", op.origin or None)
