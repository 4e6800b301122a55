"""A generation's response format, written in another warehouse's spelling.

The IR keeps the format as the source spelled it: Snowflake's `response_format` (AI_COMPLETE's
argument, or COMPLETE's option of that name), Databricks' `responseFormat`. Both are a JSON
schema the answer, a JSON text, must match, and each warehouse takes one:

- Snowflake AI_COMPLETE `response_format => {'type': 'json', 'schema': {...}}`
  (https://docs.snowflake.com/en/user-guide/snowflake-cortex/complete-structured-outputs);
- Databricks ai_query `responseFormat => '{"type": "json_schema", "json_schema": {"name": ...,
  "schema": {...}, "strict": true}}'`
  (https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_query);
- BigQuery AI.GENERATE `output_schema => 'name STRING, ...'`, a field list: only an object
  of typed fields (strings, numbers, booleans, arrays and objects of them) is expressible
  (https://cloud.google.com/bigquery/docs/reference/standard-sql/bigqueryml-syntax-ai-generate).

So each emitter rewrites the source's format as its own before the kind's emitter runs.
"""

from __future__ import annotations

import dataclasses
import json

from quail_engine.sql.ir import AiOp, OpKind
from quail_engine.sql.response_schema import SchemaError, json_schema, snowflake_format

SNOWFLAKE = "response_format"
DATABRICKS = "responseFormat"
NAMES = (SNOWFLAKE, DATABRICKS)
# BigQuery's output_schema types (the AI.GENERATE page's list) for JSON schema's scalar types
BIGQUERY_TYPES = {"string": "STRING", "integer": "INT64", "number": "FLOAT64", "boolean": "BOOL"}
# keys that say nothing an output_schema field list would lose
BIGQUERY_PLAIN_KEYS = {"type", "properties", "required", "additionalProperties", "items"}


def source_format(op: AiOp) -> tuple[str, str] | None:
    """(option name as the source spelled it, its text), or None for a call without one."""
    if op.op != OpKind.AI_GENERATE:
        return None
    for key, value in (*op.task_args, *op.options.vendor):
        if key in NAMES:
            return key, value
    return None


def schema(op: AiOp) -> dict | None:
    """The JSON schema of `op`'s format (the front end's reading where it made one); None
    where it has none or the text reads as none."""
    found = source_format(op)
    if found is None:
        return None
    if isinstance(op.schema, dict):
        return op.schema
    try:  # COMPLETE's option, which the front end keeps as a vendor option
        return json_schema(op) if found[0] in dict(op.task_args) else snowflake_format(found[1])
    except (SchemaError, ValueError):
        return None


def without_format(op: AiOp) -> AiOp:
    """`op` with its format removed from the task arguments and the vendor options."""
    return dataclasses.replace(
        op, task_args=tuple(kv for kv in op.task_args if kv[0] not in NAMES),
        options=dataclasses.replace(op.options, vendor=tuple(
            kv for kv in op.options.vendor if kv[0] not in NAMES)))


def as_format(op: AiOp, key: str, text: str) -> AiOp:
    """`op` whose format is `text` under the target's own name `key`."""
    plain = without_format(op)
    return dataclasses.replace(plain, task_args=(*plain.task_args, (key, text)))


def databricks_text(value: dict) -> str:
    """ai_query's responseFormat JSON text for the schema `value`."""
    return json.dumps({"type": "json_schema", "json_schema": {
        "name": "response", "schema": value, "strict": True}})


def bigquery_fields(value: dict) -> str | None:
    """AI.GENERATE's output_schema for an object schema of typed fields, else None."""
    if value.get("type") != "object" or not value.get("properties") or \
            set(value) - BIGQUERY_PLAIN_KEYS:
        return None
    fields = [(name, _bigquery_type(field)) for name, field in value["properties"].items()]
    if any(kind is None or not name.isidentifier() for name, kind in fields):
        return None
    return ", ".join(f"{name} {kind}" for name, kind in fields)


def _bigquery_type(value: object) -> str | None:
    if not isinstance(value, dict) or set(value) - BIGQUERY_PLAIN_KEYS:
        return None
    kind = value.get("type")
    if isinstance(kind, list):  # ["string", "null"]: every BigQuery field may be NULL
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind in BIGQUERY_TYPES:
        return BIGQUERY_TYPES[kind]
    if kind == "array":
        item = _bigquery_type(value.get("items"))
        return None if item is None or item.startswith("ARRAY") else f"ARRAY<{item}>"
    if kind == "object":
        inner = bigquery_fields(value)
        return None if inner is None else f"STRUCT<{inner}>"
    return None
