"""Generative task prompts and answer shaping for the operators that are not a yes/no or label
readout: summarize, translate, fix_grammar, mask, extract, aggregate, similarity, token counts.

The SQL front end lowers e.g. `ai_summarize(x, 10)` to template "{0}" with task="summarize" and
task_args max_words=10; this module fills in that task's wording (sql/task_prompts.py) to make
the user turn the model sees. A structured
answer (extraction, a response format, typed generation) is decoded under its JSON schema
(sql/response_schema.py), so its text parses; one the model did not complete within its
tokens is NULL.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence

from quail_engine.errors import UnsupportedError
from quail_engine.infer.api import Grammar
from quail_engine.sql.ir import FREE_TEXT
from quail_engine.sql.op_kinds import spec
from quail_engine.sql.prompt import render_prompt
from quail_engine.sql.response_schema import json_schema
from quail_engine.sql.task_prompts import FORMAT_HINTS, SCHEMA_HINT, fill, task_template

STRUCTURED_MAX_TOKENS = 128  # an object's fields, when the SQL sets no max_tokens


@functools.lru_cache(maxsize=256)
def _schema(op) -> dict | None:
    """`op`'s answer schema (not to be modified), None for free text: the front end's, read
    from a node built by hand."""
    if op.schema is None:
        return json_schema(op)
    return None if op.schema == FREE_TEXT else op.schema


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


def task_prompt(op, rendered: str) -> str:
    """The user turn for a generative operator given its rendered template: its kind's or
    task's wording (sql/task_prompts.py), else its instruction, else the template as written
    with its response format's hint."""
    template = task_template(op)
    if template is not None:
        names = tuple((_schema(op) or {}).get("properties", {})) if "{fields}" in template else ()
        return fill(template, op, rendered, names)
    if op.instruction:
        return f"{op.instruction}\n\n{rendered}"
    schema = _schema(op)
    if schema is None:
        return rendered
    kind = schema.get("type")
    hint = FORMAT_HINTS.get(kind, SCHEMA_HINT) if isinstance(kind, str) else SCHEMA_HINT
    return rendered + hint.format(schema=_schema_text(op))


def shape_text(op, text: str | None) -> object:
    """A decoded answer as the operator's SQL value: a structured answer's JSON parsed and
    typed (an incomplete one, None, is NULL), free text stripped; a summary with a word
    limit (`ai_summarize(x, 10)`) cut to it, as the vendor's limit is a cap the model's
    instruction alone does not keep."""
    if _schema_text(op) is None:
        if text is None:
            return None
        limit = int(dict(op.task_args).get("max_words") or 0) if op.task == "summarize" else 0
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


def masked(op, values: Sequence[object], mentions: str | None) -> str | None:
    """A mask's answer: the row's text with every occurrence (any case, whole words) of each
    mention the model copied replaced by [MASKED]; a mention the text does not hold changes
    nothing, and the rest of the text stays as written. None: the model did not finish."""
    if mentions is None:
        return None
    text = render_prompt(op, list(values))
    found = [m.strip() for m in json.loads(mentions).values() if isinstance(m, str)]
    for mention in sorted((m for m in found if len(m) >= 2), key=len, reverse=True):
        text = re.sub(rf"(?<!\w){re.escape(mention)}(?!\w)", "[MASKED]", text,
                      flags=re.IGNORECASE)
    return text


def details_object(text: str | None, created: int, model: str | None,
                   tokens: tuple[int, int] | None, structured: bool = False) -> str | None:
    """Snowflake's show_details object around a generated `text` (NULL stays NULL): `created`
    in epoch seconds, the `model` that wrote it, `usage` from `tokens`, the (prompt, answer)
    token counts, or null where they are not known. An answer under a response format
    (`structured`, its text JSON) is the object itself in `structured_output`, where the text
    would be in `choices`
    (https://docs.snowflake.com/en/user-guide/snowflake-cortex/complete-structured-outputs)."""
    if text is None:
        return None
    usage = None if tokens is None else {"completion_tokens": tokens[1],
                                         "prompt_tokens": tokens[0],
                                         "total_tokens": tokens[0] + tokens[1]}
    answer = ({"structured_output": [{"raw_message": json.loads(text), "type": "json"}]}
              if structured else {"choices": [{"messages": text}]})
    return json.dumps(dict(sorted({**answer, "created": created, "model": model,
                                   "usage": usage}.items())))


def is_structured(op) -> bool:
    """Whether `op`'s answer is decoded under a JSON schema (its text is JSON)."""
    return _schema(op) is not None


def check_supported(op) -> None:
    """Refuse an operator whose kind the local engine cannot answer (op_kinds.OpSpec.refusal)."""
    refusal = spec(op.op).refusal
    if refusal is not None:
        raise UnsupportedError(f"{op.op} is not supported: {refusal}", op.origin or None)
