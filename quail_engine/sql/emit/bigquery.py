"""IR -> BigQuery AI functions: the spellings every emitter shares (prompts as tuples, endpoint,
managed options, examples); each kind's emitter is in quail_engine/sql/functions/<kind>.py."""

from __future__ import annotations

from quail_engine.errors import shorten
from quail_engine.sql.emit import formats
from quail_engine.sql.emit.common import (
    dispatch,
    example_outputs,
    lit,
    parts,
    warn,
)
from quail_engine.sql.emit.one_call import VALUE
from quail_engine.sql.ir import AiOp

NAME = "bigquery"
def prompt_sql(op: AiOp, args: list[str], prefix: str = "") -> str:
    pieces = parts(op, args, NAME, prefix)
    return pieces[0] if len(pieces) == 1 else f"({', '.join(pieces)})"


def endpoint(op: AiOp) -> str:
    return f", endpoint => {lit(op.options.model, NAME)}" if op.options.model else ""


def managed(fn: str, op: AiOp) -> str:
    g = op.options.gen
    if any(v not in (None, ()) for v in (g.temperature, g.top_p, g.max_tokens, g.stop or None)):
        warn(fn, NAME, "managed AI functions take no generation parameters; they are dropped")
    extra = endpoint(op)
    if op.options.max_error_ratio is not None:
        extra += f", max_error_ratio => {op.options.max_error_ratio}"
    return extra


def examples_sql(op: AiOp) -> str:
    """`examples => [(input, output), ...]`: a filter's TRUE/FALSE, a single-label
    classification's label, a multi-label one's ARRAY of labels."""
    if not op.examples:
        return ""
    pairs = []
    for text, out in example_outputs(op):
        if isinstance(out, bool):
            value = "TRUE" if out else "FALSE"
        elif isinstance(out, list) and op.multi:
            value = "[" + ", ".join(lit(str(x), NAME) for x in out) + "]"
        else:
            value = lit(str(out[0] if isinstance(out, list) and out else out), NAME)
        pairs.append(f"({lit(text, NAME)}, {value})")
    return f", examples => [{', '.join(pairs)}]"


EMITTERS: dict = {}  # OpKind -> emitter(op, args), filled by quail_engine.sql.functions


def emit(op: AiOp, args: list[str]) -> str:
    found = formats.source_format(op)
    if found is None:
        return dispatch(EMITTERS, op, args, NAME)
    return _with_output_schema(op, args, found)


def _with_output_schema(op: AiOp, args: list[str], found: tuple[str, str]) -> str:
    """A generation under another warehouse's response format (Snowflake's response_format,
    Databricks' responseFormat: a JSON text matching a schema) as AI.GENERATE under the same
    fields' output_schema, its STRUCT written back as that JSON text:
    `(SELECT IF(v.status = '', TO_JSON_STRING(STRUCT(v.a AS a, ...)), NULL) FROM
    UNNEST([AI.GENERATE(..., output_schema => 'a STRING, ...')]) AS v)`, one call; a failed
    row (a non-empty status) is NULL, as the source's is. A schema output_schema cannot say
    (enums, bounds, unions, descriptions) is dropped, and said so, naming the option."""
    plain = formats.without_format(op)
    text = dispatch(EMITTERS, plain, args, NAME)
    value = formats.schema(op)
    fields = None if value is None else formats.bigquery_fields(value)
    if fields is None or not (text.startswith("AI.GENERATE(") and text.endswith(").result")):
        warn(op.origin.split("(", 1)[0].strip() or str(op.op), NAME, f"the {found[0]} has no output_schema spelling "
             "(a field list of types: no enums, bounds, unions or descriptions); "
             f"{shorten(found[1], 80)} is dropped, the answer is free text")
        return text
    call = f"{text[:-len(').result')]}, output_schema => {lit(fields, NAME)})"
    return fields_json(call, list(value["properties"]), "TO_JSON_STRING")


def fields_json(call: str, names: list[str], to_json: str) -> str:
    """The output_schema fields `names` of the AI.GENERATE `call` as one JSON value by
    `to_json` (TO_JSON, or TO_JSON_STRING for its text), without the `full_response` and
    `status` its STRUCT also holds: `(SELECT IF(v.status = '', to_json(STRUCT(v.a AS a, ...)),
    NULL) FROM UNNEST([call]) AS v)`, one call; a failed row (a non-empty status) is NULL."""
    struct = ", ".join(f"{VALUE}.{n} AS {n}" for n in names)
    return (f"(SELECT IF({VALUE}.status = '', {to_json}(STRUCT({struct})), NULL) "
            f"FROM UNNEST([{call}]) AS {VALUE})")
