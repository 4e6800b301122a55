"""The JSON schema a generated answer must match, read from an AI call's IR node.

Every structured form the vendors document becomes one JSON schema, which the decode engine
enforces (infer/grammar.py), so the value always parses as the type asked for:

- extraction (`AI_EXTRACT`, `EXTRACT_ANSWER`, Databricks `ai_extract`, BigQuery
  `AI.GENERATE(..., output_schema => ...)` and `AI.GENERATE_TABLE`, DuckDB `ai_extract`): an
  object with every field; a field the text does not answer is null;
- Snowflake `AI_COMPLETE(... response_format => {'type': 'json', 'schema': {...}})` or
  `TYPE OBJECT(...)`;
- Databricks `ai_query(..., responseFormat => 'STRUCT<...>' | '{"type": "json_schema", ...}')`
  and `returnType => 'FLOAT'`;
- BigQuery `AI.GENERATE_INT` / `AI.GENERATE_DOUBLE`: a bare integer or number.

SQL types (TYPE OBJECT, DDL, output_schema) are read by sqlglot in the vendor's dialect. A date,
time, timestamp or UUID is a JSON string under a pattern of its ISO form, which DuckDB casts; a
type with no JSON counterpart (BINARY, INTERVAL, MAP, GEOGRAPHY, ...) is refused with its
spelling. `landing_type` is the DuckDB type such an answer is cast to where the vendor returns
the type itself (BigQuery's output_schema fields, Databricks' returnType). The schema keeps the
JSON Schema keywords a grammar can enforce and drops the rest (descriptions, Snowflake's
`column_ordering`).
"""

from __future__ import annotations

import json
from typing import Any

from sqlglot import exp, parse_one
from sqlglot.errors import ParseError

from quail_engine.sql.ir import OpKind
from quail_engine.sql.literals import literal
from quail_engine.sql.task_prompts import mask_kinds

KEYWORDS = ("type", "properties", "required", "items", "enum", "const", "anyOf", "oneOf",
            "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern",
            "additionalProperties")
STRINGS = {exp.DType.TEXT, exp.DType.VARCHAR, exp.DType.CHAR, exp.DType.NVARCHAR,
           exp.DType.NCHAR}
# strings a grammar holds to the ISO form DuckDB's casts read, and the type they are cast to;
# [0-9], not \d: a regex's \d takes any script's digits, which no cast reads
_DAY = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_CLOCK = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?"
_ZONE = "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
_HEX = "[0-9a-f]"
PATTERNED = {
    exp.DType.DATE: (_DAY, "DATE"),
    exp.DType.TIME: (_CLOCK, "TIME"),
    exp.DType.DATETIME: (f"{_DAY}[ T]{_CLOCK}", "TIMESTAMP"),
    exp.DType.TIMESTAMP: (f"{_DAY}[ T]{_CLOCK}", "TIMESTAMP"),
    exp.DType.TIMESTAMPNTZ: (f"{_DAY}[ T]{_CLOCK}", "TIMESTAMP"),
    exp.DType.TIMESTAMPTZ: (f"{_DAY}[ T]{_CLOCK}{_ZONE}?", "TIMESTAMPTZ"),
    exp.DType.TIMESTAMPLTZ: (f"{_DAY}[ T]{_CLOCK}{_ZONE}?", "TIMESTAMPTZ"),
    exp.DType.UUID: (f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}", "UUID"),
}
INTEGERS = {exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT,
            exp.DType.INT128, exp.DType.MEDIUMINT, exp.DType.UTINYINT, exp.DType.USMALLINT, exp.DType.UINT,
            exp.DType.UBIGINT}
NUMBERS = {exp.DType.FLOAT, exp.DType.DOUBLE, exp.DType.BIGDECIMAL, exp.DType.DECFLOAT}
ANY_JSON = {exp.DType.JSON, exp.DType.VARIANT}
TYPED_GENERATION = {"BIGINT": {"type": "integer"}, "DOUBLE": {"type": "number"}}


class SchemaError(ValueError):
    """A response format with no JSON-schema reading; the message names the part."""


def json_schema(op) -> dict | None:
    """The schema `op`'s generated answer must match, or None for free text."""
    args = dict(op.task_args)
    if op.op == OpKind.AI_EXTRACT:
        if "schema" in args:
            return extraction_schema(json.loads(args["schema"]))
        if "output_schema" in args:
            return _closed(sql_type_schema(f"STRUCT<{args['output_schema']}>", "bigquery"),
                           nullable=True)
        return _closed({"type": "object", "properties": {
            lb.name: {"type": ["string", "null"]} for lb in op.labels or ()}})
    if op.op != OpKind.AI_GENERATE:
        return None
    if op.task == "mask":  # each kind's mention, copied (task_prompts.MASK_MENTIONS)
        return _closed({"type": "object", "properties": {
            kind: {"type": ["string", "null"]} for kind in mask_kinds(op)}})
    if "response_format" in args:
        return snowflake_format(args["response_format"])
    if "responseFormat" in args:
        return databricks_format(args["responseFormat"])
    if "returnType" in args:  # a STRING is free text
        schema = sql_type_schema(args["returnType"], "databricks")
        return None if schema == {"type": "string"} else schema
    return TYPED_GENERATION.get((op.output_type or "").upper())


def extraction_schema(schema: Any) -> dict:
    """An extraction's JSON schema: a JSON Schema object, or a map of field -> field schema
    (Databricks' short form); every field required, scalars nullable (not found)."""
    if not isinstance(schema, dict):
        raise SchemaError(f"an extraction schema must be a JSON object, got {schema!r}")
    if "properties" not in schema and schema.get("type") != "object":
        schema = {"type": "object", "properties": schema}
    return _closed(plain(schema), nullable=True)


def snowflake_format(text: str) -> dict:
    """AI_COMPLETE's response_format: `TYPE OBJECT(...)` or an object constant
    `{'type': 'json', 'schema': {...}}` (stored as written), in a node built by hand or read
    from another dialect's text argument; the Snowflake front end reads the argument's own
    tree (`snowflake_format_node`)."""
    if text.upper().startswith("TYPE "):
        return sql_type_schema(text[5:], "snowflake")
    return _format_value(_object_constant(text), text)


def snowflake_format_node(node: exp.Expr) -> dict:
    """`snowflake_format` of the argument as the front end parsed it: the tree read, not its
    Snowflake text written and parsed again."""
    text = node.sql(dialect="snowflake")  # quoted by messages only
    if isinstance(node, exp.DataType):
        return _type(node, text, "snowflake")
    return _format_value(literal(node, "response_format", "AI_COMPLETE", "snowflake"), text)


def _format_value(value: Any, text: str) -> dict:
    if value == {"type": "json"}:  # JSON without a schema: any object
        return {"type": "object"}
    schema = value.get("schema") if isinstance(value, dict) else None
    if not isinstance(schema, dict):
        raise SchemaError(f"response_format needs {{'type': 'json', 'schema': {{...}}}} or "
                          f"TYPE OBJECT(...), got {text}")
    return _closed(plain(schema))


def databricks_format(text: str) -> dict:
    """ai_query's responseFormat: a DDL STRUCT type or an OpenAI-style JSON schema
    (`{"type": "json_schema", "json_schema": {"schema": {...}}}`; `{"type": "json_object"}`
    asks for any object)."""
    try:
        spec = json.loads(text)
    except ValueError:
        return sql_type_schema(text, "databricks")
    if isinstance(spec, dict) and spec.get("type") == "json_object":
        return {"type": "object"}
    inner = spec.get("json_schema") if isinstance(spec, dict) else None
    schema = inner.get("schema") if isinstance(inner, dict) else None
    if not isinstance(schema, dict):
        raise SchemaError(f"responseFormat needs a STRUCT<...> type or "
                          f'{{"type": "json_schema", "json_schema": {{"schema": ...}}}}, '
                          f"got {text}")
    return _closed(plain(schema))


def sql_type_schema(text: str, dialect: str) -> dict:
    """The JSON schema of a SQL type spelled in `dialect` (OBJECT/STRUCT fields required)."""
    return _type(_read_type(text, dialect), text, dialect)


def landing_type(text: str, dialect: str) -> exp.DataType:
    """The DuckDB type an answer under the SQL type `text` (spelled in `dialect`) is cast to:
    strings VARCHAR, whole numbers BIGINT, other numbers DOUBLE, BOOLEAN, dates, times and UUIDs
    as themselves, JSON / VARIANT as JSON, and ARRAY / STRUCT / OBJECT of these, nested.
    SchemaError where the type has no JSON counterpart (as `sql_type_schema`)."""
    dtype = _read_type(text, dialect)
    _type(dtype, text, dialect)
    return exp.DataType.build(_landing(dtype, text, dialect), dialect="duckdb")


def _read_type(text: str, dialect: str) -> exp.DataType:
    try:
        return exp.DataType.build(text, dialect=dialect)
    except (ParseError, ValueError) as exc:
        raise SchemaError(f"cannot read the type {text!r}: {exc}") from None


def _landing(dtype: exp.DataType, whole: str, dialect: str) -> str:
    kind = dtype.this
    if kind in PATTERNED:
        return PATTERNED[kind][1]
    if kind == exp.DType.ARRAY:
        return f"{_landing(dtype.expressions[0], whole, dialect)}[]"
    if kind in (exp.DType.STRUCT, exp.DType.OBJECT):
        fields = ", ".join(f"{exp.to_identifier(col.name, quoted=True).sql('duckdb')} "
                           f"{_landing(col.args['kind'], whole, dialect)}"
                           for col in dtype.expressions)
        return f"STRUCT({fields})"
    json_kind = _type(dtype, whole, dialect).get("type")
    return {"string": "VARCHAR", "integer": "BIGINT", "number": "DOUBLE",
            "boolean": "BOOLEAN"}.get(json_kind, "JSON")


def _type(dtype: exp.DataType, whole: str, dialect: str) -> dict:
    kind = dtype.this
    if kind in STRINGS:
        return {"type": "string"}
    if kind in PATTERNED:
        return {"type": "string", "pattern": f"^{PATTERNED[kind][0]}$"}
    if kind in INTEGERS:
        return {"type": "integer"}
    if kind in NUMBERS:
        return {"type": "number"}
    if kind == exp.DType.DECIMAL:
        # DECIMAL(p) has scale 0, and so has Snowflake's bare NUMBER; BigQuery's NUMERIC not
        scale = dtype.expressions[1:2]
        whole_numbers = (scale[0].name == "0" if scale else
                         bool(dtype.expressions) or dialect == "snowflake")
        return {"type": "integer" if whole_numbers else "number"}
    if kind == exp.DType.BOOLEAN:
        return {"type": "boolean"}
    if kind in ANY_JSON:
        return {}
    if kind == exp.DType.ARRAY and dtype.expressions:
        return {"type": "array", "items": _type(dtype.expressions[0], whole, dialect)}
    if kind in (exp.DType.STRUCT, exp.DType.OBJECT) and dtype.expressions:
        fields = {}
        for col in dtype.expressions:
            if not isinstance(col, exp.ColumnDef) or col.args.get("kind") is None:
                raise SchemaError(f"a field of {whole!r} needs a name and a type: {col.sql()}")
            fields[col.name] = _type(col.args["kind"], whole, dialect)
        return _closed({"type": "object", "properties": fields})
    raise SchemaError(f"the type {dtype.sql(dialect)} in {whole!r} has no JSON counterpart (use "
                      "strings, numbers, booleans, dates, times, timestamps, arrays and objects)")


def plain(schema: Any) -> Any:
    """`schema` with the keywords a grammar enforces, recursively."""
    if isinstance(schema, list):
        return [plain(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key in KEYWORDS:
        if key not in schema:
            continue
        value = schema[key]
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: plain(s) for name, s in value.items()}
        elif key in ("items", "anyOf", "oneOf", "additionalProperties"):
            out[key] = plain(value)
        else:
            out[key] = value
    return out


def _closed(schema: dict, nullable: bool = False) -> dict:
    """An object schema whose fields are all present and no others (the SQL reads them by
    name); with `nullable`, a scalar field may be null (the text does not say)."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return schema
    if nullable:
        props = {name: _or_null(s) for name, s in props.items()}
    return {**schema, "type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def _or_null(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, str) and kind in ("string", "integer", "number", "boolean"):
        return {**schema, "type": [kind, "null"]}
    return schema


def _object_constant(text: str) -> Any:
    """A Snowflake object constant as written (`{'type': 'json', ...}`) as Python values; JSON
    text as itself."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return literal(parse_one(text, read="snowflake"), "response_format", "AI_COMPLETE",
                       "snowflake")
    except ParseError as exc:
        raise SchemaError(f"cannot read the response format {text}: {exc}") from None
