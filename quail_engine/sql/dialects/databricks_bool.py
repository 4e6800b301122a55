"""Databricks' yes/no questions read as ai_filter.

Databricks has no ai_filter (https://docs.databricks.com/aws/en/large-language-models/ai-functions);
users ask a boolean question in one of three ways, each read here as the ai_filter of the
user's own prompt (the IR's boolean readout replaces the vendor's answer format):

- `ai_query(ep, p, responseFormat => 'STRUCT<answer: BOOLEAN>'):answer[::BOOLEAN]`, or the
  same field in a JSON-schema responseFormat
  (`'{"type": "json_schema", "json_schema": {"schema": {"properties": {"answer": {"type":
  "boolean"}}}}}'`, https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_query);
- `ai_query(ep, p) = 'TRUE'`: true/yes in any case, on either side, also under UPPER/LOWER
  with a literal in that case (`UPPER(...) = 'yes'` never matches, so it is left as written);
- `ai_classify(x, ARRAY('TRUE', 'FALSE')) = 'TRUE'` (or yes/no labels, any order): the
  literal must be one of the labels as written, as Databricks returns them verbatim.

The opposite answer (`= 'FALSE'`, `<> 'TRUE'`, `= 'no'`) is NOT of that filter; NULL stays
NULL either way (a NULL prompt or answer drops the row). A negated filter is not planned (NOT
is not a conjunct the planner orders), as with Snowflake's `NOT AI_FILTER(...)`.
"""

from __future__ import annotations

import dataclasses
import json
import re

from sqlglot import exp

from quail_engine.sql.build import Built
from quail_engine.sql.dialects.common import climb_json
from quail_engine.sql.ir import OpKind

NAME = "databricks"
POSITIVE = ("true", "yes")
NEGATIVE = ("false", "no")
PAIRS = ({"true", "false"}, {"yes", "no"})
BOOL_FORMAT = re.compile(r"^\s*STRUCT\s*<\s*(\w+)\s*:\s*BOOLEAN\s*>\s*$", re.IGNORECASE)
CASE_FUNCTIONS = {exp.Upper: ("upper", str.upper), exp.Lower: ("lower", str.lower)}


def read_boolean(built: Built, node: exp.Expr) -> tuple[exp.Expr, Built] | None:
    """(the node the filter replaces, the call as an ai_filter), or None when `node` is not
    one of the idioms."""
    return _structured(built, node) or _compared(built, node)


def boolean_field(response_format: str) -> str | None:
    """The one BOOLEAN field a responseFormat (DDL or JSON schema) asks for, else None."""
    match = BOOL_FORMAT.match(response_format)
    if match:
        return match.group(1)
    try:
        spec = json.loads(response_format)
    except ValueError:
        return None
    if not isinstance(spec, dict) or spec.get("type") != "json_schema":
        return None
    wrapper = spec.get("json_schema")
    schema = wrapper.get("schema") if isinstance(wrapper, dict) else None
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or len(props) != 1:
        return None
    name, field = next(iter(props.items()))
    return name if isinstance(field, dict) and field.get("type") == "boolean" else None


def _structured(built: Built, node: exp.Expr) -> tuple[exp.Expr, Built] | None:
    op = built.op
    if op.op != OpKind.AI_GENERATE or op.task is not None or built.shape is not None:
        return None
    climbed = climb_json(node)
    field = boolean_field(dict(op.task_args).get("responseFormat", ""))
    if climbed is None or field is None:
        return None
    outer, path, has_text_cast = climbed
    if has_text_cast or path.lower() != field.lower():
        return None
    cast = outer.parent
    if isinstance(cast, exp.Cast) and cast.this is outer and cast.to.this == exp.DType.BOOLEAN:
        outer = cast
    return outer, _as_filter(built, f"{NAME}:ai_query:{path}", negated=False)


def _compared(built: Built, node: exp.Expr) -> tuple[exp.Expr, Built] | None:
    side, case = node, None
    if type(node.parent) in CASE_FUNCTIONS and node.parent.this is node:
        side, case = node.parent, CASE_FUNCTIONS[type(node.parent)]
    cmp = side.parent
    if not isinstance(cmp, exp.EQ | exp.NEQ):
        return None
    other = cmp.expression if cmp.this is side else cmp.this
    if not (isinstance(other, exp.Literal) and other.is_string):
        return None
    answer = _answer(built, other.this, case)
    if answer is None:
        return None
    fn = "ai_query" if built.op.op == OpKind.AI_GENERATE else "ai_classify"
    shown = f"{case[0]}({fn})" if case else fn
    sign = "=" if isinstance(cmp, exp.EQ) else "<>"
    negated = answer != isinstance(cmp, exp.EQ)
    return cmp, _as_filter(built, f"{NAME}:{shown}{sign}{other.this}", negated=negated)


def _answer(built: Built, text: str, case) -> bool | None:
    """True/False for the answer the literal names, None when it names neither (or never
    matches what the call returns)."""
    op = built.op
    convert = case[1] if case else (lambda s: s)
    if op.op == OpKind.AI_GENERATE and op.task is None and not op.task_args and \
            built.shape is None:
        if convert(text) != text or text.lower() not in POSITIVE + NEGATIVE:
            return None
        return text.lower() in POSITIVE
    names = [lb.name for lb in op.labels or ()]
    if op.op != OpKind.AI_CLASSIFY or op.task is not None or op.multi or built.shape is not None \
            or len(names) != 2 or {n.lower() for n in names} not in PAIRS:
        return None
    if text not in [convert(n) for n in names]:
        return None
    return text.lower() in POSITIVE


def _as_filter(built: Built, wrapper: str, *, negated: bool) -> Built:
    op = dataclasses.replace(built.op, op=OpKind.AI_FILTER, labels=None, output_type="BOOLEAN",
                             wrapper=wrapper, task_args=())
    return dataclasses.replace(built, op=op, shape="negated" if negated else None)
