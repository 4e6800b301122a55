"""ai_generate: free text (or a typed value) decoded from a prompt, and the task functions
that are a generation (summarize, translate, fix grammar, mask).

Snowflake AI_COMPLETE, COMPLETE / TRY_COMPLETE (a conversation), AI_TRANSLATE / TRANSLATE,
SUMMARIZE (https://docs.snowflake.com/en/sql-reference/functions/ai_complete); BigQuery
AI.GENERATE and its typed forms (https://cloud.google.com/bigquery/docs/reference/standard-sql/
bigqueryml-syntax-ai-generate; with an output_schema it is an extraction, with GENERATE_BOOL a
filter); Databricks ai_query, ai_gen, ai_summarize, ai_translate, ai_mask, ai_fix_grammar
(https://docs.databricks.com/aws/en/large-language-models/ai-functions); DuckDB ai_generate.
"""

from __future__ import annotations

import json
from functools import partial

from sqlglot import exp

from quail_engine.sql import shapes
from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind, fragment
from quail_engine.sql.dialects import bigquery as bq
from quail_engine.sql.dialects import databricks as dbx
from quail_engine.sql.dialects import duckdb as ddb
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.dialects.common import append, as_file, joined, text_input
from quail_engine.sql.emit import bigquery as bq_sql
from quail_engine.sql.emit import databricks as dbx_sql
from quail_engine.sql.emit import duckdb as ddb_sql
from quail_engine.sql.emit import snowflake as sf_sql
from quail_engine.sql.emit.common import lit, refuse, task_prefix, warn
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import AiOp, OpKind, Options
from quail_engine.sql.literals import (
    flag,
    gen_params,
    labels,
    literal,
    options,
    schema_fields,
    string,
    whole,
)
from quail_engine.sql.prompt import Prompt
from quail_engine.sql.response_schema import SchemaError, snowflake_format_node, sql_type_schema
from quail_engine.sql.shapes import SHOW_DETAILS, shows_details
from quail_engine.sql.validate import Site, known_keys, language, number, text

KINDS = (OpKind.AI_GENERATE,)

# the documented keys of Snowflake's options object (a misspelled key is refused, not ignored)
SNOWFLAKE_KEYS = ("temperature", "top_p", "max_tokens", "guardrails")
SNOWFLAKE_MAX_TOKENS = 8192  # https://docs.snowflake.com/en/sql-reference/functions/ai_complete
# AI_TRANSLATE's language codes ('' = detect the source), from its usage notes:
# https://docs.snowflake.com/en/sql-reference/functions/ai_translate
SNOWFLAKE_LANGUAGES = ("", "ar", "zh", "hr", "cs", "nl", "en", "fi", "fr", "de", "el", "he", "hi",
                       "it", "ja", "ko", "no", "pl", "pt", "ro", "ru", "es", "sv", "tr")
SNOWFLAKE_ROLES = ("system", "user", "assistant")
# https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_translate
DATABRICKS_LANGUAGES = ("en", "de", "fr", "it", "pt", "hi", "es", "th")
DEFAULT_SUMMARY_WORDS = 50  # ai_summarize's documented default
BIGQUERY_GENERATIVE = ("endpoint", "model_params", "connection_id", "request_type")
BIGQUERY_TYPES = {"STRING": "VARCHAR", "INT64": "BIGINT", "FLOAT64": "DOUBLE", "BOOL": "BOOLEAN",
                  "NUMERIC": "DOUBLE"}
BIGQUERY_TYPED = {"BIGINT": "AI.GENERATE_INT", "DOUBLE": "AI.GENERATE_DOUBLE"}

def _build_snowflake(call: Call, legacy: bool = False, try_: bool = False) -> Built:
    names = ("model", "prompt", "model_parameters", "response_format", "show_details")
    a = bind(call, Signature(names, 2, ("file", "options")), sf.NAME)
    params = a.get("model_parameters", a.get("options"))
    if "model_parameters" in a and not isinstance(params, exp.Struct | exp.ParseJSON):  # FILE
        a["file"], params = a.pop("model_parameters"), None
    if isinstance(a["prompt"], exp.Array) and not legacy:
        raise ArgumentError(f"{call.name} takes one prompt string or PROMPT(...); a "
                            "conversation history is SNOWFLAKE.CORTEX.COMPLETE's form",
                            call.sql(sf.NAME), sf.NAME)
    opts = options(params, "model_parameters", call.name, sf.NAME)
    site = Site(call.name, call.sql(sf.NAME), sf.NAME)
    known_keys(site, "the options" if legacy else "model_parameters", opts,
               (*SNOWFLAKE_KEYS, "response_format") if legacy else SNOWFLAKE_KEYS)
    prompt = (_snowflake_history(a["prompt"], call) if isinstance(a["prompt"], exp.Array)
              else text_input(a["prompt"], call.name, sf.NAME))
    file = a.get("file")
    if file is not None:
        prompt = append(prompt, file)
    task_args = []
    fmt = a.get("response_format")
    if fmt is not None:
        spelled = fmt.sql(dialect=sf.NAME)
        task_args.append(("response_format", f"TYPE {spelled}" if isinstance(fmt, exp.DataType)
                          else spelled))
    if legacy and params is not None or flag(a.get("show_details"), "show_details", call):
        task_args.append(SHOW_DETAILS)
    on_error = "fail" if legacy and not try_ else "null"
    gen = gen_params(opts)
    if gen.max_tokens is not None:  # "max_tokens (default 4096, max 8192)"
        number(site, "option max_tokens", gen.max_tokens, 1, SNOWFLAKE_MAX_TOKENS, integer=True)
    rest = {k: v for k, v in opts.items() if k.lower() not in
            ("temperature", "top_p", "max_tokens", "stop")}
    built = make(OpKind.AI_GENERATE, prompt, call, task_args=tuple(task_args),
                 options=Options(model=string(a["model"], "the model", call.name, sf.NAME),
                                 gen=gen, on_error=on_error, vendor=vendor_items(rest)),
                 read_schema=None if fmt is None else partial(snowflake_format_node, fmt))
    return built if file is None else as_file(built, file)


def _snowflake_history(node: exp.Array, call: Call) -> Prompt:
    """COMPLETE's conversation `[{'role': ..., 'content': ...}, ...]` as one prompt: the
    earlier turns as `role: content` lines, then the last message's content, which must be the
    user's (https://docs.snowflake.com/en/sql-reference/functions/complete-snowflake-cortex).
    Contents may read columns; roles are literals."""
    site = Site(call.name, call.sql(sf.NAME), sf.NAME)
    turns = []
    for message in node.expressions:
        fields = {e.this.name.lower(): e.expression for e in message.expressions
                  if isinstance(e, exp.PropertyEQ)} if isinstance(message, exp.Struct) else {}
        if set(fields) != {"role", "content"} or len(fields) != len(message.expressions):
            raise ArgumentError(f"{call.name}: each message of the conversation must be "
                                "{'role': ..., 'content': ...}", fragment(message, sf.NAME),
                                sf.NAME)
        role = text(site, "a message role", literal(fields["role"], "the role", call.name, sf.NAME),
                    SNOWFLAKE_ROLES)
        turns.append((role, text_input(fields["content"], call.name, sf.NAME)))
    if not turns or turns[-1][0] != "user":
        raise ArgumentError(f"{call.name}: the conversation must end with a user message",
                            site.sql, sf.NAME)
    lines = [Prompt(f"{role}: {p.template}", p.exprs) for role, p in turns[:-1]]
    return joined([*lines, turns[-1][1]])


def _build_snowflake_translate(call: Call) -> Built:
    names = ("text", "source_language", "target_language", "return_error_details")
    a = bind(call, Signature(names, 3), sf.NAME)
    on_error, shape = sf.read_on_error(a, call)
    site = Site(call.name, call.sql(sf.NAME), sf.NAME)
    langs = tuple((k, language(site, k, string(a[k], k, call.name, sf.NAME),
                               SNOWFLAKE_LANGUAGES if k == "source_language"
                               else SNOWFLAKE_LANGUAGES[1:]))
                  for k in names[1:3])
    return make(OpKind.AI_GENERATE, text_input(a["text"], call.name, sf.NAME), call, shape=shape,
                task="translate", task_args=langs, options=Options(on_error=on_error))


def _build_snowflake_summarize(call: Call) -> Built:
    a = bind(call, Signature(("text",), 1), sf.NAME)
    return make(OpKind.AI_GENERATE, text_input(a["text"], call.name, sf.NAME), call,
                task="summarize")


def _bigquery_schema(schema: str, call: Call) -> tuple[tuple[str, str], ...]:
    return tuple((name, BIGQUERY_TYPES.get(kind.upper(), "JSON"))
                 for name, kind in schema_fields(schema, call))


def _duckdb_type(name: str) -> exp.DataType:
    return exp.DataType.build(name, dialect="duckdb")


def _bigquery_struct(fields: tuple[tuple[str, str], ...]) -> exp.Expr:
    """AI.GENERATE's result under output_schema, around the extraction's JSON answer (the
    shape's slot): `struct_pack("<field>" := CAST(v->>'<field>' AS <type>), ...,
    full_response := v, status := '')`, built as a tree from the schema's fields."""
    def read(name: str, type_: str) -> exp.Expr:
        path = exp.JSONPath(expressions=[exp.JSONPathRoot(), exp.JSONPathKey(this=name)])
        return exp.Cast(this=exp.JSONExtractScalar(this=shapes.slot(), expression=path,
                                                   only_json_types=False, scalar_only=False),
                        to=_duckdb_type(type_).copy())
    return exp.Struct(expressions=[
        *(exp.PropertyEQ(this=exp.to_identifier(n, quoted=True), expression=read(n, t))
          for n, t in fields),
        exp.PropertyEQ(this=exp.to_identifier("full_response"), expression=shapes.slot()),
        exp.PropertyEQ(this=exp.to_identifier("status"), expression=exp.Literal.string(""))])


def _build_bigquery(call: Call, output_type: str = "VARCHAR") -> Built:
    a = bind(call, Signature(("prompt",), 1, (*BIGQUERY_GENERATIVE, "output_schema")), bq.NAME)
    prompt = text_input(a["prompt"], call.name, bq.NAME)
    if a.get("output_schema") is not None:
        schema = string(a["output_schema"], "output_schema", call.name, bq.NAME)
        fields = _bigquery_schema(schema, call)
        built = make(OpKind.AI_EXTRACT, prompt, call, options=bq.read_options(a, call),
                     labels=labels(exp.Array(expressions=[exp.Literal.string(n)
                                                          for n, _ in fields]),
                                   call.name, bq.NAME),
                     task_args=(("output_schema", schema),))
        built.shape = _bigquery_struct(fields)
        return built
    op = OpKind.AI_FILTER if output_type == "BOOLEAN" else OpKind.AI_GENERATE
    return make(op, prompt, call, shape="result_struct", options=bq.read_options(a, call),
                output_type=output_type)


def _build_databricks(call: Call) -> Built:
    names = ("endpoint", "request")
    named = ("returnType", "failOnError", "modelParameters", "responseFormat", "files")
    a = bind(call, Signature(names, 2, named), dbx.NAME)
    is_fail = flag(a.get("failOnError"), "failOnError", call) is not False
    params = options(a.get("modelParameters"), "modelParameters", call.name, dbx.NAME)
    rest = {k: v for k, v in params.items() if k.lower() not in ("max_tokens", "temperature",
                                                                  "top_p", "stop")}
    task_args = tuple((k, string(a[k], k, call.name, dbx.NAME)) for k in ("responseFormat",
                                                                       "returnType") if k in a)
    prompt = text_input(a["request"], call.name, dbx.NAME)
    if "files" in a:  # read, so that running it is refused (sql/runnable.py), not dropped
        prompt = append(prompt, a["files"])
    built = make(OpKind.AI_GENERATE, prompt, call,
                 shape=None if is_fail else "result_error_struct", task_args=task_args,
                 output_type=_databricks_type(dict(task_args).get("returnType"), call),
                 options=Options(model=string(a["endpoint"], "the endpoint", call.name, dbx.NAME),
                                 gen=gen_params(params), on_error="fail" if is_fail else "details",
                                 vendor=vendor_items(rest)))
    return built if "files" not in a else as_file(built, a["files"])


def _databricks_type(ddl: str | None, call: Call) -> str | None:
    """The SQL type of ai_query's answer under `returnType => ddl`: its scalars as themselves,
    a STRUCT or ARRAY as JSON (DuckDB reads its fields with `->>` / `.field`)."""
    if ddl is None:
        return None
    try:
        kind = sql_type_schema(ddl, dbx.NAME).get("type")
    except SchemaError as exc:
        raise ArgumentError(f"{call.name}: {exc}", call.sql(dbx.NAME), dbx.NAME) from None
    return {"string": "VARCHAR", "integer": "BIGINT", "number": "DOUBLE",
            "boolean": "BOOLEAN"}.get(kind, "JSON")


def _databricks_task(task: str | None, op: str = OpKind.AI_GENERATE):
    def build(call: Call) -> Built:
        a = bind(call, Signature(("content",), 1), dbx.NAME)
        return make(op, text_input(a["content"], call.name, dbx.NAME), call, task=task)
    return build


def _build_databricks_summarize(call: Call) -> Built:
    a = bind(call, Signature(("content", "max_words"), 1), dbx.NAME)
    words = a.get("max_words")  # Databricks' default is 50 words; 0 means no limit
    limit = DEFAULT_SUMMARY_WORDS if words is None else whole(words, "max_words", call)
    args = (("max_words", str(limit)),)
    return make(OpKind.AI_GENERATE, text_input(a["content"], call.name, dbx.NAME), call,
                task="summarize", task_args=args)


def _build_databricks_translate(call: Call) -> Built:
    a = bind(call, Signature(("content", "to_lang"), 2), dbx.NAME)
    lang = language(Site(call.name, call.sql(dbx.NAME), dbx.NAME), "to_lang",
                    string(a["to_lang"], "to_lang", call.name, dbx.NAME), DATABRICKS_LANGUAGES)
    return make(OpKind.AI_GENERATE, text_input(a["content"], call.name, dbx.NAME), call,
                task="translate", task_args=(("target_language", lang),))


def _build_databricks_mask(call: Call) -> Built:
    a = bind(call, Signature(("content", "labels"), 2), dbx.NAME)
    return make(OpKind.AI_GENERATE, text_input(a["content"], call.name, dbx.NAME), call,
                task="mask", labels=labels(a["labels"], call.name, dbx.NAME))


def _snowflake_params(op: AiOp) -> str:
    g = op.options.gen
    values = {k: v for k, v in (("temperature", g.temperature), ("top_p", g.top_p),
                                ("max_tokens", g.max_tokens)) if v is not None}
    return f", {sf_sql.object_text(values)}" if values else ""


def _emit_snowflake(op: AiOp, args: list[str]) -> str:
    name, prompt = sf_sql.NAME, sf_sql.prompt_sql(op, args)
    a = dict(op.task_args)
    if op.task == "translate":
        sf_sql.no_model("AI_TRANSLATE", op)
        return (f"AI_TRANSLATE({prompt}, {lit(a.get('source_language', ''), name)}, "
                f"{lit(a.get('target_language', 'en'), name)})")
    if op.task == "summarize":
        if a.get("max_words"):
            warn("SUMMARIZE", name, "Snowflake's SUMMARIZE has no word limit; max_words dropped")
        return f"SNOWFLAKE.CORTEX.SUMMARIZE({prompt})"
    if op.task is not None:
        raise refuse(f"ai_{op.task}", name, "Cortex has no such task function", op)
    model = op.options.model
    if model is None:
        model = sf_sql.DEFAULT_MODEL
        warn("AI_COMPLETE", name, f"AI_COMPLETE needs a model; using {sf_sql.DEFAULT_MODEL!r}")
    params = _snowflake_params(op)
    if "responseFormat" in a:
        warn("ai_query", name, "a Databricks responseFormat has no AI_COMPLETE spelling; dropped")
    if shows_details(op):  # named arguments: positional ones cannot skip to show_details
        named = [f"model => {lit(model, name)}", f"prompt => {prompt}"]
        if params:
            named.append(f"model_parameters => {params[2:]}")
        if "response_format" in a:
            named.append(f"response_format => {a['response_format']}")
        return f"AI_COMPLETE({', '.join(named)}, show_details => TRUE)"
    if "response_format" in a:
        params = f"{params or ', {}'}, {a['response_format']}"
    sql = f"AI_COMPLETE({lit(model, name)}, {prompt}{params})"
    if op.output_type in ("BIGINT", "DOUBLE"):
        warn("AI_COMPLETE", name, f"typed generation becomes a cast of free text to "
             f"{op.output_type}")
        return f"TRY_CAST({sql} AS {'INT' if op.output_type == 'BIGINT' else 'FLOAT'})"
    return sql


def _bigquery_params(op: AiOp) -> str:
    g = op.options.gen
    config = {k: v for k, v in (("maxOutputTokens", g.max_tokens), ("temperature", g.temperature),
                                ("topP", g.top_p), ("stopSequences", list(g.stop) or None))
              if v is not None}
    if not config:
        return ""
    return f", model_params => JSON {lit(json.dumps({'generationConfig': config}), bq_sql.NAME)}"


def _emit_bigquery(op: AiOp, args: list[str]) -> str:
    prefix = task_prefix(op)
    if op.task is not None:
        warn(f"ai_{op.task}", bq_sql.NAME, "spelled as AI.GENERATE with an instruction prefix")
    if {"response_format", "responseFormat"} & set(dict(op.task_args)):
        warn("ai_generate", bq_sql.NAME, "the response format is dropped (AI.GENERATE takes an "
             "output_schema of its own)")
    fn = BIGQUERY_TYPED.get(op.output_type, "AI.GENERATE")
    return (f"{fn}({bq_sql.prompt_sql(op, args, prefix)}{bq_sql.endpoint(op)}"
            f"{_bigquery_params(op)}).result")


def _emit_databricks(op: AiOp, args: list[str]) -> str:
    name, prompt = dbx_sql.NAME, dbx_sql.prompt_sql(op, args)
    a = dict(op.task_args)
    if op.task == "summarize":
        words = f", {a['max_words']}" if a.get("max_words") else ""
        return f"ai_summarize({prompt}{words})"
    if op.task == "translate":
        if a.get("source_language"):
            warn("ai_translate", name, "ai_translate detects the source language; "
                 f"{a['source_language']!r} is dropped")
        return f"ai_translate({prompt}, {lit(a.get('target_language', 'en'), name)})"
    if op.task == "fix_grammar":
        return f"ai_fix_grammar({prompt})"
    if op.task == "mask":
        return f"ai_mask({prompt}, ARRAY({', '.join(lit(lb.name, name) for lb in op.labels)}))"
    if op.task is not None:
        raise refuse(f"ai_{op.task}", name, "Databricks has no such task function", op)
    if "response_format" in a:
        warn("AI_COMPLETE", name, "a Snowflake response_format has no ai_query spelling; dropped")
    fmt = f", responseFormat => {lit(a['responseFormat'], name)}" if "responseFormat" in a else ""
    if op.options.model:
        dbx_sql.fail_on_error("ai_query", op)
        sql = (f"ai_query({lit(op.options.model, name)}, {prompt}{dbx_sql.model_params(op)}"
               f"{fmt})")
    else:
        if dbx_sql.model_params(op):
            warn("ai_gen", name, "ai_gen takes no generation parameters; they are dropped")
        sql = f"ai_gen({prompt})"
    if op.output_type in ("BIGINT", "DOUBLE"):
        warn("ai_generate", name, "typed generation becomes a cast of free text to "
             f"{op.output_type}")
        return f"TRY_CAST({sql} AS {op.output_type})"
    return sql


def decoding_notes(op: AiOp, default_max_tokens: int) -> list[str]:
    """What a decoded answer (ai_generate, and ai_extract's JSON) differs in: greedy, within
    the call's token limit (else `default_max_tokens`), sampling options ignored."""
    limit = op.options.gen.max_tokens or default_max_tokens
    notes = [f"greedy decoding, at most {limit} new tokens (the profile's max_new_tokens "
             "caps it)"]
    if op.options.gen.temperature or op.options.gen.top_p:
        notes.append("temperature and top_p are ignored")
    return notes


PARSE = {
    "snowflake": {
        "AI_COMPLETE": _build_snowflake,
        "AI_TRANSLATE": _build_snowflake_translate,
        sf.CORTEX + "COMPLETE": lambda call: _build_snowflake(call, legacy=True),
        sf.CORTEX + "TRY_COMPLETE": lambda call: _build_snowflake(call, legacy=True, try_=True),
        sf.CORTEX + "SUMMARIZE": _build_snowflake_summarize,
        sf.CORTEX + "TRANSLATE": _build_snowflake_translate,
    },
    "bigquery": {
        "AI.GENERATE": _build_bigquery,
        "AI.GENERATE_BOOL": lambda call: _build_bigquery(call, "BOOLEAN"),
        "AI.GENERATE_INT": lambda call: _build_bigquery(call, "BIGINT"),
        "AI.GENERATE_DOUBLE": lambda call: _build_bigquery(call, "DOUBLE"),
    },
    "databricks": {
        "AI_QUERY": _build_databricks,
        "AI_SUMMARIZE": _build_databricks_summarize,
        "AI_TRANSLATE": _build_databricks_translate,
        "AI_MASK": _build_databricks_mask,
        "AI_FIX_GRAMMAR": _databricks_task("fix_grammar"),
        "AI_GEN": _databricks_task(None),
    },
    "duckdb": {"AI_GENERATE": ddb.templated(OpKind.AI_GENERATE)},
}
EMIT = {
    "snowflake": _emit_snowflake,
    "bigquery": _emit_bigquery,
    "databricks": _emit_databricks,
    "duckdb": ddb_sql.prompt_call,
}
NOTES = decoding_notes
