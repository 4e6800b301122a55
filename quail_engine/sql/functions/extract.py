"""ai_extract: a JSON object of named fields (or a JSON schema's) decoded from a text.

Snowflake AI_EXTRACT and EXTRACT_ANSWER (https://docs.snowflake.com/en/sql-reference/functions/
ai_extract), Databricks ai_extract v1/v2 (https://docs.databricks.com/aws/en/sql/
language-manual/functions/ai_extract), DuckDB ai_extract(input, ['field', ...]); BigQuery's
extraction is AI.GENERATE with an output_schema (functions/generate/bigquery.py reads it), written
back as that. Databricks' ai_parse_document is refused here: quail reads text, not documents.
"""

from __future__ import annotations

import json

from sqlglot import exp

from quail_engine.sql import shapes
from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects import databricks as dbx
from quail_engine.sql.dialects import duckdb as ddb
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.dialects.common import Wrapper, as_file, text_input
from quail_engine.sql.emit import bigquery as bq_sql
from quail_engine.sql.emit import databricks as dbx_sql
from quail_engine.sql.emit import duckdb as ddb_sql
from quail_engine.sql.emit import snowflake as sf_sql
from quail_engine.sql.emit.common import lit, refuse, warn
from quail_engine.sql.errors import ArgumentError, UnsupportedError
from quail_engine.sql.functions.generate import decoding_notes
from quail_engine.sql.ir import AiOp, Label, OpKind, Options
from quail_engine.sql.literals import IDENTIFIER, labels, literal, options, parse_json, string

KINDS = (OpKind.AI_EXTRACT,)


def _build_snowflake(call: Call) -> Built:
    a = bind(call, Signature(("text", "responseFormat"), 0, ("file", "scores", "config")), sf.NAME)
    source = a.get("text", a.get("file"))
    if source is None or "responseFormat" not in a:
        raise ArgumentError(f"{call.name} needs text (or file) and responseFormat",
                            call.sql(sf.NAME), sf.NAME)
    fmt = literal(a["responseFormat"], "responseFormat", call.name, sf.NAME)
    task_args = []
    fields = None
    if isinstance(fmt, dict) and "schema" in fmt:
        task_args.append(("schema", json.dumps(fmt["schema"], sort_keys=True)))
    else:
        fields = labels(a["responseFormat"], call.name, sf.NAME)
    if a.get("scores") is not None:
        task_args.append(("scores", json.dumps(literal(a["scores"], "scores", call.name, sf.NAME))))
    built = make(OpKind.AI_EXTRACT, text_input(source, call.name, sf.NAME), call,
                 shape="extract_object", labels=fields, task_args=tuple(task_args))
    return as_file(built, source, "document") if "file" in a else built


def _build_snowflake_answer(call: Call) -> Built:
    a = bind(call, Signature(("source_document", "question"), 2), sf.NAME)
    question = string(a["question"], "the question", call.name, sf.NAME)
    return make(OpKind.AI_EXTRACT, text_input(a["source_document"], call.name, sf.NAME), call,
                shape="answer_array", task="extract_answer", labels=(Label("answer", question),))


def _build_databricks(call: Call) -> Built:
    a = bind(call, Signature(("content", "labels", "options"), 2), dbx.NAME)
    prompt = text_input(a["content"], call.name, dbx.NAME)
    if isinstance(a["labels"], exp.Array):
        found = labels(a["labels"], call.name, dbx.NAME)
        built = make(OpKind.AI_EXTRACT, prompt, call, labels=found)
        # a STRUCT of the labels, read from the call's JSON once (a struct_pack of one field
        # access per label repeats the call per label: N labels, N copies of N labels)
        fields = json.dumps({lb.name: "VARCHAR" for lb in found})
        built.shape = exp.Anonymous(this="json_transform",
                                    expressions=[shapes.slot(), exp.Literal.string(fields)])
        return built
    schema = parse_json(string(a["labels"], "the schema", call.name, dbx.NAME), "the schema",
                        call.name, a["labels"], dbx.NAME)
    opts = options(a.get("options"), "options", call.name, dbx.NAME)
    if isinstance(schema, list):
        return make(OpKind.AI_EXTRACT, prompt, call, shape="response_extract",
                    labels=tuple(Label(str(s)) for s in schema),
                    options=Options(vendor=vendor_items({"labels_json": "true", **opts})))
    return make(OpKind.AI_EXTRACT, prompt, call, shape="response_extract",
                task_args=(("schema", json.dumps(schema, sort_keys=True)),),
                options=Options(vendor=vendor_items(opts)))


def _build_databricks_document(call: Call) -> Built:
    raise UnsupportedError("ai_parse_document is not supported: quail reads text columns, not "
                           "binary documents", call.sql(dbx.NAME), dbx.NAME)


def _build_duckdb(call: Call) -> Built:
    if len(call.args) not in (1, 2):
        raise ArgumentError(f"{call.name} takes an input and a field list",
                            call.sql(ddb.NAME), ddb.NAME)
    opts, fields, task_args = ddb.named_args(call)
    if len(call.args) == 2:
        ddb.check_once(call, fields, "labels")
    found = labels(call.args[1], call.name, ddb.NAME) if len(call.args) == 2 else fields.pop(
        "labels", None)
    if found is None and "schema" not in dict(task_args) and fields.get("task") is None:
        raise ArgumentError(f"{call.name} needs a field list or schema := '...'",
                            call.sql(ddb.NAME), ddb.NAME)
    schema = dict(task_args).get("schema")
    if schema is not None:  # a JSON schema: read now, not when some emitter needs it
        parse_json(schema, "the schema", call.name, call.node, ddb.NAME)
    return make(OpKind.AI_EXTRACT, ddb.read_prompt(call, call.args[:1]), call, options=opts,
                labels=found, task_args=task_args, **fields)


def _emit_snowflake(op: AiOp, args: list[str]) -> str:
    schema = dict(op.task_args).get("schema")
    if schema is not None:
        fmt = f"PARSE_JSON({lit(json.dumps({'schema': json.loads(schema)}), sf_sql.NAME)})"
    elif any(lb.description for lb in op.labels or ()):
        fmt = sf_sql.object_text({lb.name: lb.description or lb.name for lb in op.labels})
    else:
        fmt = "[" + ", ".join(lit(lb.name, sf_sql.NAME) for lb in op.labels or ()) + "]"
    return f"AI_EXTRACT({sf_sql.prompt_sql(op, args)}, {fmt}):response"


def _emit_bigquery(op: AiOp, args: list[str]) -> str:
    if dict(op.task_args).get("schema") or not op.labels:
        raise refuse("ai_extract", bq_sql.NAME, "a JSON-schema response format has no "
                     "output_schema spelling here", op)
    if not all(IDENTIFIER.match(lb.name) for lb in op.labels):
        raise refuse("ai_extract", bq_sql.NAME, "output_schema fields must be identifiers; "
                     f"these are {', '.join(repr(lb.name) for lb in op.labels)}", op)
    if any(lb.description and lb.description != lb.name for lb in op.labels):
        warn("ai_extract", bq_sql.NAME, "field questions are dropped; output_schema names the "
             "fields")
    schema = ", ".join(f"{lb.name} STRING" for lb in op.labels)
    call = (f"AI.GENERATE({bq_sql.prompt_sql(op, args)}, "
            f"output_schema => {lit(schema, bq_sql.NAME)}{bq_sql.endpoint(op)})")
    # the fields alone, as the extraction's response is: TO_JSON of the whole STRUCT would
    # hold AI.GENERATE's full_response and status beside them
    return bq_sql.fields_json(call, [lb.name for lb in op.labels], "TO_JSON")


def _emit_databricks(op: AiOp, args: list[str]) -> str:
    schema = dict(op.task_args).get("schema")
    if any(lb.description and lb.description != lb.name for lb in op.labels or ()):
        warn("ai_extract", dbx_sql.NAME, "field questions are dropped; the schema names the "
             "fields")
    fmt = schema if schema is not None else json.dumps([lb.name for lb in op.labels or ()])
    return f"ai_extract({dbx_sql.prompt_sql(op, args)}, {lit(fmt, dbx_sql.NAME)}):response"


def _emit_duckdb(op: AiOp, args: list[str]) -> str:
    listed = [ddb_sql.labels_sql(op)] if op.labels is not None else []
    positional = [ddb_sql.prompt_sql(op, args), *listed]
    return ddb_sql.spelled(op, positional, positional_fields=("labels",))


def _notes(op: AiOp, default_max_tokens: int) -> list[str]:
    return [*decoding_notes(op, default_max_tokens),
            "the JSON is decoded under the fields' schema; an answer not complete within its "
            "tokens is NULL"]


PARSE = {
    "snowflake": {
        "AI_EXTRACT": _build_snowflake,
        sf.CORTEX + "EXTRACT_ANSWER": _build_snowflake_answer,
    },
    "bigquery": {},
    "databricks": {
        "AI_EXTRACT": _build_databricks,
        "AI_PARSE_DOCUMENT": _build_databricks_document,
    },
    "duckdb": {"AI_EXTRACT": _build_duckdb},
}
EMIT = {
    "snowflake": _emit_snowflake,
    "bigquery": _emit_bigquery,
    "databricks": _emit_databricks,
    "duckdb": _emit_duckdb,
}
# the result wrappers the vendors put around an extraction (stripped when read)
WRAPPERS = {
    "snowflake": {"extract_object": {"response": Wrapper("response")}},
    "databricks": {"response_extract": {"response": Wrapper("response")}},
}
NOTES = _notes
