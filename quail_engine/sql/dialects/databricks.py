"""Databricks AI Functions -> IR. Docs: https://docs.databricks.com/aws/en/large-language-models/ai-functions

Databricks has no ai_filter: its yes/no idioms (`ai_classify(x, ARRAY('yes','no')) = 'yes'`,
`ai_query(ep, p) = 'TRUE'`, `ai_query(ep, p, responseFormat => 'STRUCT<m: BOOLEAN>'):m`) are
read as ai_filter in databricks_bool.py.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp
from sqlglot.dialects.databricks import Databricks
from sqlglot.generators.databricks import DatabricksGenerator
from sqlglot.parsers.databricks import DatabricksParser

from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects.common import (
    append,
    as_file,
    climb_json,
    text_input,
    untyped_ai,
)
from quail_engine.sql.dialects.databricks_bool import read_boolean
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import OpKind, Options
from quail_engine.sql.literals import (
    flag,
    gen_params,
    labels,
    options,
    string,
    whole,
)
from quail_engine.sql.response_schema import SchemaError, sql_type_schema
from quail_engine.sql.validate import Site, language

NAME = "databricks"
# https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_translate
LANGUAGES = ("en", "de", "fr", "it", "pt", "hi", "es", "th")


def _json_value(gen: DatabricksGenerator, node: exp.Expr) -> str:
    """Databricks has no JSON_OBJECT/JSON_ARRAY (sqlglot prints an unreadable `JSON_OBJECT('k':
    v)`): a vendor result shape rebuilt here is NAMED_STRUCT/ARRAY, serialised once, at the
    top, by TO_JSON (https://docs.databricks.com/aws/en/sql/language-manual/functions/to_json)."""
    if isinstance(node, exp.JSONObject):
        items = [f"{gen.sql(kv, 'this')}, {gen.sql(kv, 'expression')}" for kv in node.expressions]
        text = f"NAMED_STRUCT({', '.join(items)})"
    else:
        text = f"ARRAY({', '.join(gen.sql(e) for e in node.expressions)})"
    inside = isinstance(node.parent, exp.JSONKeyValue | exp.JSONArray)
    return text if inside else f"TO_JSON({text})"


class QuailDatabricks(Databricks):
    class Parser(DatabricksParser):
        FUNCTIONS = untyped_ai(DatabricksParser.FUNCTIONS)

    class Generator(DatabricksGenerator):
        TRANSFORMS = {**DatabricksGenerator.TRANSFORMS, exp.JSONObject: _json_value,
                      exp.JSONArray: _json_value}


def _build_query(call: Call) -> Built:
    names = ("endpoint", "request")
    named = ("returnType", "failOnError", "modelParameters", "responseFormat", "files")
    a = bind(call, Signature(names, 2, named), NAME)
    is_fail = flag(a.get("failOnError"), "failOnError", call) is not False
    params = options(a.get("modelParameters"), "modelParameters", call.name, NAME)
    rest = {k: v for k, v in params.items() if k.lower() not in ("max_tokens", "temperature",
                                                                  "top_p", "stop")}
    task_args = tuple((k, string(a[k], k, call.name, NAME)) for k in ("responseFormat",
                                                                       "returnType") if k in a)
    prompt = text_input(a["request"], call.name, NAME)
    if "files" in a:  # read, so that running it is refused (sql/runnable.py), not dropped
        prompt = append(prompt, a["files"])
    built = make(OpKind.AI_GENERATE, prompt, call,
                 shape=None if is_fail else "result_error_struct", task_args=task_args,
                 output_type=_return_type(dict(task_args).get("returnType"), call),
                 options=Options(model=string(a["endpoint"], "the endpoint", call.name, NAME),
                                 gen=gen_params(params), on_error="fail" if is_fail else "details",
                                 vendor=vendor_items(rest)))
    return built if "files" not in a else as_file(built, a["files"])


def _return_type(ddl: str | None, call: Call) -> str | None:
    """The SQL type of ai_query's answer under `returnType => ddl`: its scalars as themselves,
    a STRUCT or ARRAY as JSON (DuckDB reads its fields with `->>` / `.field`)."""
    if ddl is None:
        return None
    try:
        kind = sql_type_schema(ddl, NAME).get("type")
    except SchemaError as exc:
        raise ArgumentError(f"{call.name}: {exc}", call.sql(NAME), NAME) from None
    return {"string": "VARCHAR", "integer": "BIGINT", "number": "DOUBLE",
            "boolean": "BOOLEAN"}.get(kind, "JSON")


def _one(task: str | None, op: str = OpKind.AI_GENERATE):
    def build(call: Call) -> Built:
        a = bind(call, Signature(("content",), 1), NAME)
        return make(op, text_input(a["content"], call.name, NAME), call, task=task)
    return build


DEFAULT_SUMMARY_WORDS = 50  # ai_summarize's documented default


def _build_summarize(call: Call) -> Built:
    a = bind(call, Signature(("content", "max_words"), 1), NAME)
    words = a.get("max_words")  # Databricks' default is 50 words; 0 means no limit
    limit = DEFAULT_SUMMARY_WORDS if words is None else whole(words, "max_words", call)
    args = (("max_words", str(limit)),)
    return make(OpKind.AI_GENERATE, text_input(a["content"], call.name, NAME), call,
                task="summarize", task_args=args)


def _build_translate(call: Call) -> Built:
    a = bind(call, Signature(("content", "to_lang"), 2), NAME)
    lang = language(Site(call.name, call.sql(NAME), NAME), "to_lang",
                    string(a["to_lang"], "to_lang", call.name, NAME), LANGUAGES)
    return make(OpKind.AI_GENERATE, text_input(a["content"], call.name, NAME), call,
                task="translate", task_args=(("target_language", lang),))


def _build_mask(call: Call) -> Built:
    a = bind(call, Signature(("content", "labels"), 2), NAME)
    return make(OpKind.AI_GENERATE, text_input(a["content"], call.name, NAME), call, task="mask",
                labels=labels(a["labels"], call.name, NAME))


FUNCTIONS = {
    "AI_QUERY": _build_query,
    "AI_SUMMARIZE": _build_summarize,
    "AI_TRANSLATE": _build_translate,
    "AI_MASK": _build_mask,
    "AI_FIX_GRAMMAR": _one("fix_grammar"),
    "AI_GEN": _one(None),
}

WRAPPERS = {
}


def lookup(name: str):
    return FUNCTIONS.get(name)


def is_ai_name(name: str) -> bool:
    return name.startswith("AI_")


def unwrap(built: Built, node: exp.Expr) -> tuple[exp.Expr, str | None, Built]:
    """Strip `:response[0]`, and read the boolean idioms as ai_filter."""
    boolean = read_boolean(built, node)
    if boolean is not None:
        outer, built = boolean
        return outer, built.op.wrapper, built
    op, parent = built.op, node.parent
    if (built.shape == "result_error_struct" and isinstance(parent, exp.Dot)
            and parent.this is node and parent.expression.name.lower() == "result"):
        op = dataclasses.replace(op, wrapper=f"{NAME}:.result")
        return parent, op.wrapper, dataclasses.replace(built, op=op, shape=None)
    climbed = climb_json(node)
    if climbed is None:
        return node, None, built
    outer, path, _ = climbed
    w = WRAPPERS.get(built.shape or "", {}).get(path)
    if w is None:
        return node, None, built
    text = f"{NAME}:{path}"
    if built.op.multi and _is_array_parse(outer):
        outer, text = outer.parent, f"from_json({text}, 'array<string>')"
    return outer, text, dataclasses.replace(built, op=dataclasses.replace(op, wrapper=text),
                                            shape=w.shape)


def _is_array_parse(node: exp.Expr) -> bool:
    """`from_json(<node>, 'array<string>')`: a multi-label response read as its labels
    (https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_classify, unnested with
    `explode`); the canonical value already is that array."""
    parent = node.parent
    schema = parent.expression if isinstance(parent, exp.FromJson) else None
    return (parent is not None and parent.this is node and isinstance(schema, exp.Literal)
            and schema.is_string and schema.this.replace(" ", "").lower() == "array<string>")
