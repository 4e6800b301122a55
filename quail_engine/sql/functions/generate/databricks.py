"""Databricks' spellings of ai_generate: ai_query, ai_gen and the task functions ai_summarize,
ai_translate, ai_mask, ai_fix_grammar
(https://docs.databricks.com/aws/en/large-language-models/ai-functions), read and written."""

from __future__ import annotations

from sqlglot import exp

from quail_engine.sql import shapes
from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects import databricks as dbx
from quail_engine.sql.dialects.common import append, as_file, text_input
from quail_engine.sql.emit import databricks as dbx_sql
from quail_engine.sql.emit.common import lit, refuse, warn
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import AiOp, OpKind, Options
from quail_engine.sql.literals import flag, gen_params, gen_spelling, labels, options, string, whole
from quail_engine.sql.response_schema import SchemaError, landing_type
from quail_engine.sql.validate import Site, language

# https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_translate
DATABRICKS_LANGUAGES = ("en", "de", "fr", "it", "pt", "hi", "es", "th")
DEFAULT_SUMMARY_WORDS = 50  # ai_summarize's documented default
# returnType scalars the answer's UDF returns as themselves; any other type (ARRAY, STRUCT,
# DATE, ...) is the answer's JSON cast to it by the call's shape
UDF_TYPES = {exp.DType.TEXT: "VARCHAR", exp.DType.VARCHAR: "VARCHAR", exp.DType.BIGINT: "BIGINT",
             exp.DType.DOUBLE: "DOUBLE", exp.DType.BOOLEAN: "BOOLEAN"}


def build_databricks(call: Call) -> Built:
    names = ("endpoint", "request")
    named = ("returnType", "failOnError", "modelParameters", "responseFormat", "files")
    a = bind(call, Signature(names, 2, named), dbx.NAME)
    is_fail = flag(a.get("failOnError"), "failOnError", call) is not False
    params = options(a.get("modelParameters"), "modelParameters", call.name, dbx.NAME)
    call.spelled.update(gen_spelling(params), model="endpoint")  # (messages: the user's names)
    rest = {k: v for k, v in params.items() if k.lower() not in ("max_tokens", "temperature",
                                                                  "top_p", "stop")}
    task_args = tuple((k, string(a[k], k, call.name, dbx.NAME)) for k in ("responseFormat",
                                                                       "returnType") if k in a)
    prompt = text_input(a["request"], call.name, dbx.NAME)
    if "files" in a:  # read, so that running it is refused (sql/runnable.py), not dropped
        prompt = append(prompt, a["files"])
    ddl = dict(task_args).get("returnType")
    landing = None if ddl is None else _databricks_type(ddl, call)
    is_cast = landing is not None and landing.this not in UDF_TYPES
    built = make(OpKind.AI_GENERATE, prompt, call,
                 shape=None if is_fail else "result_error_struct", task_args=task_args,
                 output_type="JSON" if is_cast else landing and UDF_TYPES[landing.this],
                 options=Options(model=string(a["endpoint"], "the endpoint", call.name, dbx.NAME),
                                 gen=gen_params(params), on_error="fail" if is_fail else "details",
                                 vendor=vendor_items(rest)))
    if is_cast:
        built.shape = _databricks_typed(landing, ddl, is_fail)
    return built if "files" not in a else as_file(built, a["files"])


def _databricks_type(ddl: str, call: Call) -> exp.DataType:
    """The DuckDB type of ai_query's answer under `returnType => ddl`."""
    try:
        return landing_type(ddl, dbx.NAME)
    except SchemaError as exc:
        raise ArgumentError(f"{call.name}: {exc}", call.sql(dbx.NAME), dbx.NAME) from None


def _databricks_typed(landing: exp.DataType, ddl: str, is_fail: bool) -> exp.Expr:
    """The returnType's value, cast from the answer's JSON (the shape's slot): with
    `failOnError => false`, in `{result, errorMessage}`, the message saying why it is NULL."""
    answer = shapes.slot()
    value = shapes.typed(answer, landing)
    if is_fail:
        return value
    why = exp.Coalesce(this=shapes.no_answer(answer, dbx.NAME),
                       expressions=[shapes.unconverted(answer, value, ddl)])
    return exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.to_identifier("result"), expression=value.copy()),
        exp.PropertyEQ(this=exp.to_identifier("errorMessage"), expression=why)])


def databricks_task(task: str | None, op: str = OpKind.AI_GENERATE):
    def build(call: Call) -> Built:
        a = bind(call, Signature(("content",), 1), dbx.NAME)
        return make(op, text_input(a["content"], call.name, dbx.NAME), call, task=task)
    return build


def build_databricks_summarize(call: Call) -> Built:
    a = bind(call, Signature(("content", "max_words"), 1), dbx.NAME)
    words = a.get("max_words")  # Databricks' default is 50 words; 0 means no limit
    limit = DEFAULT_SUMMARY_WORDS if words is None else whole(words, "max_words", call)
    args = (("max_words", str(limit)),)
    return make(OpKind.AI_GENERATE, text_input(a["content"], call.name, dbx.NAME), call,
                task="summarize", task_args=args)


def build_databricks_translate(call: Call) -> Built:
    a = bind(call, Signature(("content", "to_lang"), 2), dbx.NAME)
    lang = language(Site(call.name, call.sql(dbx.NAME), dbx.NAME), "to_lang",
                    string(a["to_lang"], "to_lang", call.name, dbx.NAME), DATABRICKS_LANGUAGES)
    return make(OpKind.AI_GENERATE, text_input(a["content"], call.name, dbx.NAME), call,
                task="translate", task_args=(("target_language", lang),))


def build_databricks_mask(call: Call) -> Built:
    a = bind(call, Signature(("content", "labels"), 2), dbx.NAME)
    return make(OpKind.AI_GENERATE, text_input(a["content"], call.name, dbx.NAME), call,
                task="mask", labels=labels(a["labels"], call.name, dbx.NAME))

def emit_databricks(op: AiOp, args: list[str]) -> str:
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
