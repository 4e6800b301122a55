"""ai_count_tokens: the number of tokens a text is, by the model's tokenizer (no model pass).

Snowflake AI_COUNT_TOKENS counts the text a named function would read
(https://docs.snowflake.com/en/sql-reference/functions/ai_count_tokens), BigQuery
AI.COUNT_TOKENS (https://cloud.google.com/bigquery/docs/reference/standard-sql/
bigqueryml-syntax-ai-count-tokens), DuckDB ai_count_tokens; Databricks has none.
"""

from __future__ import annotations

import dataclasses
import json

from sqlglot import exp

from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects import bigquery as bq
from quail_engine.sql.dialects import duckdb as ddb
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.dialects.common import append, text_input, text_prompt
from quail_engine.sql.emit import bigquery as bq_sql
from quail_engine.sql.emit import databricks as dbx_sql
from quail_engine.sql.emit import duckdb as ddb_sql
from quail_engine.sql.emit import snowflake as sf_sql
from quail_engine.sql.emit.common import lit, refuse, warn
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import AiOp, Label, OpKind, Options
from quail_engine.sql.literals import labels, options, string
from quail_engine.sql.prompt import Prompt
from quail_engine.sql.validate import Site, show

KINDS = (OpKind.AI_COUNT_TOKENS,)

# AI_COUNT_TOKENS's function names (lower case, `ai_` first: "The name of the function must
# begin with 'ai_' and use only lowercase letters") -> the arguments after the name, besides an
# optional trailing options object (the module docstring's page)
OBJECTS = (exp.Struct, exp.Map, exp.VarMap, exp.ParseJSON)
COUNTED = {
    "ai_complete": ("model", "input"), "ai_embed": ("model", "input"),
    "ai_classify": ("input", "categories"), "ai_translate": ("input", "source", "target"),
    "ai_similarity": ("input", "input2"), "ai_filter": ("input",), "ai_agg": ("input",),
    "ai_summarize_agg": ("input",), "ai_sentiment": ("input",), "ai_extract": ("input",),
}


def _count_function(call: Call) -> str:
    site = Site(call.name, call.sql(sf.NAME), sf.NAME)
    fn = string(call.args[0], "the function name", call.name, sf.NAME)
    if fn in COUNTED:
        return fn
    if fn.lower() in COUNTED:
        why = f"names are written in lower case: {fn.lower()!r}"
    elif f"ai_{fn.lower()}" in COUNTED:
        why = f"names begin with 'ai_': {'ai_' + fn.lower()!r}"
    else:
        why = f"expected one of {', '.join(COUNTED)}"
    raise ArgumentError(f"{call.name}: unknown function name {show(fn)}; {why}", site.sql, sf.NAME)


def _build_snowflake(call: Call) -> Built:
    """The text the named function would read, as one template: the input, then one line per
    further counted argument (translate's languages, similarity's second text, classify's
    categories and config), so the count covers them all."""
    if call.kwargs or not call.args:
        raise ArgumentError(f"{call.name} takes positional arguments: a function name, then "
                            "its inputs", call.sql(sf.NAME), sf.NAME)
    fn = _count_function(call)
    params = COUNTED[fn]
    args = call.args[1:]
    opts_node = args[len(params)] if len(args) == len(params) + 1 else None
    is_object = isinstance(opts_node, OBJECTS) and fn != "ai_translate"
    if len(args) != len(params) + (opts_node is not None and is_object):
        raise ArgumentError(f"{call.name}({fn!r}, ...) takes {', '.join(params)}"
                            f"{'' if fn == 'ai_translate' else ' [, options]'}",
                            call.sql(sf.NAME), sf.NAME)
    given = dict(zip(params, args))
    config = options(opts_node if is_object else None, "the options", call.name, sf.NAME)
    model = string(given["model"], "the model", call.name, sf.NAME) if "model" in given else \
        config.pop("model", None) if fn == "ai_similarity" else None
    prompt = (text_prompt(given["input"]) if fn == "ai_similarity"
              else text_input(given["input"], call.name, sf.NAME))
    for extra in ("input2", "source", "target"):
        if extra in given:
            prompt = append(prompt, given[extra])
    found = None
    if "categories" in given:
        found = labels(given["categories"], call.name, sf.NAME, min_count=2)
        prompt = Prompt(f"{prompt.template}\n{category_text(found)}", prompt.exprs)
    if config and fn == "ai_classify":
        prompt = Prompt(f"{prompt.template}\n{json.dumps(config, sort_keys=True)}", prompt.exprs)
    return make(OpKind.AI_COUNT_TOKENS, prompt, call, labels=found,
                task_args=(("function", fn),),
                options=Options(model=model, vendor=vendor_items(config)))


def category_text(found: tuple[Label, ...]) -> str:
    """Categories as AI_COUNT_TOKENS counts them: one JSON line (names, or name: description)."""
    if any(lb.description for lb in found):
        return json.dumps({lb.name: lb.description or "" for lb in found})
    return json.dumps([lb.name for lb in found])

def _build_bigquery(call: Call) -> Built:
    a = bind(call, Signature(("input",), 1, ("endpoint",)), bq.NAME)
    return make(OpKind.AI_COUNT_TOKENS, text_input(a["input"], call.name, bq.NAME), call,
                shape="result_struct", options=bq.read_options(a, call))


# AI_COUNT_TOKENS's arguments after the input, each one line of the op's template
COUNT_EXTRAS = {"ai_translate": 2, "ai_similarity": 1, "ai_classify": 1}


def _emit_snowflake(op: AiOp, args: list[str]) -> str:
    """`AI_COUNT_TOKENS(fn, [model,] input[, extras][, options])`: the special forms' extra
    arguments are the last lines of the template (_build_snowflake writes them so)."""
    a = dict(op.task_args)
    fn = a.get("function", "ai_complete")
    config = dict(op.options.vendor)
    n = COUNT_EXTRAS.get(fn, 0) + (fn == "ai_classify" and bool(config))
    head, *tail = op.template.rsplit("\n", n) if n else (op.template,)
    if len(tail) != n:
        raise refuse(f"AI_COUNT_TOKENS({fn!r}, ...)", sf_sql.NAME, "the counted text has no "
                     "separate arguments to pass to this form", op)
    if fn == "ai_classify":
        cats = ", ".join(sf_sql.object_text({"label": lb.name, "description": lb.description})
                         if lb.description else lit(lb.name, sf_sql.NAME) for lb in op.labels or ())
        extras = [f"[{cats}]"]
    else:
        extras = [sf_sql.prompt_sql(dataclasses.replace(op, template=t), args) for t in tail]
    model, lead = op.options.model, []
    if fn in ("ai_complete", "ai_embed"):
        if model is None:
            model = sf_sql.DEFAULT_MODEL if fn == "ai_complete" else sf_sql.DEFAULT_EMBED
            warn("AI_COUNT_TOKENS", sf_sql.NAME, f"{fn} needs a model; using {model!r}")
        lead = [lit(model, sf_sql.NAME)]
    elif fn == "ai_similarity" and model:
        config["model"] = model
    if config:
        extras.append(sf_sql.object_text({k: _vendor_value(v) for k, v in config.items()}))
    body = [*lead, sf_sql.prompt_sql(dataclasses.replace(op, template=head), args), *extras]
    return f"AI_COUNT_TOKENS({lit(fn, sf_sql.NAME)}, {', '.join(body)})"


def _vendor_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _emit_bigquery(op: AiOp, args: list[str]) -> str:
    return f"AI.COUNT_TOKENS({bq_sql.prompt_sql(op, args)}{bq_sql.endpoint(op)}).result"


def _notes(op: AiOp, default_max_tokens: int) -> list[str]:
    return ["counts the tokens of the profile's model, not the warehouse model's"]


PARSE = {
    "snowflake": {"AI_COUNT_TOKENS": _build_snowflake},
    "bigquery": {"AI.COUNT_TOKENS": _build_bigquery},
    "databricks": {},
    "duckdb": {"AI_COUNT_TOKENS": ddb.unary(OpKind.AI_COUNT_TOKENS, 1)},
}
EMIT = {
    "snowflake": _emit_snowflake,
    "bigquery": _emit_bigquery,
    "databricks": dbx_sql.refused("ai_count_tokens", "Databricks has no token-counting function"),
    "duckdb": ddb_sql.prompt_call,
}
NOTES = _notes
