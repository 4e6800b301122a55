"""IR -> Snowflake Cortex AISQL."""

from __future__ import annotations

import dataclasses
import json

from quail_engine.sql.build import SENTIMENT_LABELS
from quail_engine.sql.emit.common import (
    dispatch,
    drop_examples,
    example_outputs,
    lit,
    refuse,
    similarity_range,
    single,
    warn,
)
from quail_engine.sql.ir import AiOp, OpKind
from quail_engine.sql.shapes import shows_details

NAME = "snowflake"
DEFAULT_MODEL = "llama3.1-8b"
DEFAULT_EMBED = "snowflake-arctic-embed-l-v2.0"


def _prompt(op: AiOp, args: list[str]) -> str:
    one = single(op, args, NAME)
    if one is not None:
        return one
    used = sorted({p for p in range(len(args)) if f"{{{p}}}" in op.template})
    return f"PROMPT({', '.join([lit(op.template, NAME), *[args[i] for i in used]])})"


def _value(v) -> str:
    """A Snowflake constant: OBJECT `{...}`, ARRAY `[...]`, string, number or boolean."""
    if isinstance(v, dict):
        return _object(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, str):
        return lit(v, NAME)
    return json.dumps(v).upper() if isinstance(v, bool) else json.dumps(v)


def _object(values: dict) -> str:
    return "{" + ", ".join(f"{lit(k, NAME)}: {_value(v)}" for k, v in values.items()) + "}"


def _no_model(fn: str, op: AiOp) -> None:
    if op.options.model:
        warn(fn, NAME, f"Snowflake task functions choose their own model; {op.options.model!r} "
             "is dropped")


def _filter(op: AiOp, args: list[str]) -> str:
    _no_model("AI_FILTER", op)
    drop_examples("AI_FILTER", NAME, op)
    return f"AI_FILTER({_prompt(op, args)})"


def _classify(op: AiOp, args: list[str]) -> str:
    _no_model("AI_CLASSIFY", op)
    names = tuple(lb.name for lb in op.labels or ())
    if op.task == "sentiment":
        if names != SENTIMENT_LABELS[NAME]:
            warn("AI_SENTIMENT", NAME, f"labels {list(names)} become Snowflake's "
                 f"{list(SENTIMENT_LABELS[NAME])}")
        aspects = dict(op.task_args).get("aspects")
        if aspects is not None:  # the whole {"categories": [...]} object, as the call answers
            return f"AI_SENTIMENT({_prompt(op, args)}, {_value(json.loads(aspects))})"
        return f"AI_SENTIMENT({_prompt(op, args)}):categories[0]:sentiment::STRING"
    cats = ", ".join(_object({"label": lb.name, "description": lb.description})
                     if lb.description else lit(lb.name, NAME) for lb in op.labels)
    config = {}
    if op.instruction:
        config["task_description"] = op.instruction
    if op.multi:
        config["output_mode"] = "multi"
    if op.examples:  # {'input', 'labels'}: a BigQuery example's one label becomes a list
        config["examples"] = [{"input": text, "labels": out if isinstance(out, list) else [out]}
                              for text, out in example_outputs(op)]
    extra = f", {_object(config)}" if config else ""
    path = ":labels" if op.multi else ":labels[0]::STRING"
    return f"AI_CLASSIFY({_prompt(op, args)}, [{cats}]{extra}){path}"


def _score(op: AiOp, args: list[str]) -> str:
    if op.task == "sentiment" and similarity_range(op) == "-1..1":
        return f"SNOWFLAKE.CORTEX.SENTIMENT({_prompt(op, args)})"
    raise refuse("ai_score", NAME, "Cortex has no scoring function (AI.SCORE's rubric "
                 "scoring has no equivalent)", op)


def _params(op: AiOp) -> str:
    g = op.options.gen
    values = {k: v for k, v in (("temperature", g.temperature), ("top_p", g.top_p),
                                ("max_tokens", g.max_tokens)) if v is not None}
    return f", {_object(values)}" if values else ""


def _generate(op: AiOp, args: list[str]) -> str:
    a = dict(op.task_args)
    if op.task == "translate":
        _no_model("AI_TRANSLATE", op)
        return (f"AI_TRANSLATE({_prompt(op, args)}, {lit(a.get('source_language', ''), NAME)}, "
                f"{lit(a.get('target_language', 'en'), NAME)})")
    if op.task == "summarize":
        if a.get("max_words"):
            warn("SUMMARIZE", NAME, "Snowflake's SUMMARIZE has no word limit; max_words dropped")
        return f"SNOWFLAKE.CORTEX.SUMMARIZE({_prompt(op, args)})"
    if op.task is not None:
        raise refuse(f"ai_{op.task}", NAME, "Cortex has no such task function", op)
    model = op.options.model
    if model is None:
        model = DEFAULT_MODEL
        warn("AI_COMPLETE", NAME, f"AI_COMPLETE needs a model; using {DEFAULT_MODEL!r}")
    params = _params(op)
    if "responseFormat" in a:
        warn("ai_query", NAME, "a Databricks responseFormat has no AI_COMPLETE spelling; dropped")
    if shows_details(op):  # named arguments: positional ones cannot skip to show_details
        named = [f"model => {lit(model, NAME)}", f"prompt => {_prompt(op, args)}"]
        if params:
            named.append(f"model_parameters => {params[2:]}")
        if "response_format" in a:
            named.append(f"response_format => {a['response_format']}")
        return f"AI_COMPLETE({', '.join(named)}, show_details => TRUE)"
    if "response_format" in a:
        params = f"{params or ', {}'}, {a['response_format']}"
    sql = f"AI_COMPLETE({lit(model, NAME)}, {_prompt(op, args)}{params})"
    if op.output_type in ("BIGINT", "DOUBLE"):
        warn("AI_COMPLETE", NAME, f"typed generation becomes a cast of free text to "
             f"{op.output_type}")
        return f"TRY_CAST({sql} AS {'INT' if op.output_type == 'BIGINT' else 'FLOAT'})"
    return sql


def _extract(op: AiOp, args: list[str]) -> str:
    schema = dict(op.task_args).get("schema")
    if schema is not None:
        fmt = f"PARSE_JSON({lit(json.dumps({'schema': json.loads(schema)}), NAME)})"
    elif any(lb.description for lb in op.labels or ()):
        fmt = _object({lb.name: lb.description or lb.name for lb in op.labels})
    else:
        fmt = "[" + ", ".join(lit(lb.name, NAME) for lb in op.labels or ()) + "]"
    return f"AI_EXTRACT({_prompt(op, args)}, {fmt}):response"


def _aggregate(op: AiOp, args: list[str]) -> str:
    if ("distinct", "true") in op.task_args:
        raise refuse("AI.AGG(DISTINCT ...)", NAME, "AI_AGG has no DISTINCT form", op)
    if op.instruction is None:
        return f"AI_SUMMARIZE_AGG({_prompt(op, args)})"
    return f"AI_AGG({_prompt(op, args)}, {lit(op.instruction, NAME)})"


def _embed(op: AiOp, args: list[str]) -> str:
    model = op.options.model or DEFAULT_EMBED
    if op.options.model is None:
        warn("AI_EMBED", NAME, f"AI_EMBED needs a model; using {DEFAULT_EMBED!r}")
    return f"AI_EMBED({lit(model, NAME)}, {_prompt(op, args)})"


def _similarity(op: AiOp, args: list[str]) -> str:
    if similarity_range(op) != "-1..1":
        raise refuse("ai_similarity", NAME, f"the source similarity ranges over "
                     f"{similarity_range(op)}, Snowflake's AI_SIMILARITY over -1..1", op)
    config = f", {_object({'model': op.options.model})}" if op.options.model else ""
    return f"AI_SIMILARITY({args[0]}, {args[1]}{config})"


# AI_COUNT_TOKENS's arguments after the input, each one line of the op's template
COUNT_EXTRAS = {"ai_translate": 2, "ai_similarity": 1, "ai_classify": 1}


def _count_tokens(op: AiOp, args: list[str]) -> str:
    """`AI_COUNT_TOKENS(fn, [model,] input[, extras][, options])`: the special forms' extra
    arguments are the last lines of the template (dialects/snowflake_tokens.py writes them so)."""
    a = dict(op.task_args)
    fn = a.get("function", "ai_complete")
    config = dict(op.options.vendor)
    n = COUNT_EXTRAS.get(fn, 0) + (fn == "ai_classify" and bool(config))
    head, *tail = op.template.rsplit("\n", n) if n else (op.template,)
    if len(tail) != n:
        raise refuse(f"AI_COUNT_TOKENS({fn!r}, ...)", NAME, "the counted text has no "
                     "separate arguments to pass to this form", op)
    if fn == "ai_classify":
        cats = ", ".join(_object({"label": lb.name, "description": lb.description})
                         if lb.description else lit(lb.name, NAME) for lb in op.labels or ())
        extras = [f"[{cats}]"]
    else:
        extras = [_prompt(dataclasses.replace(op, template=t), args) for t in tail]
    model, lead = op.options.model, []
    if fn in ("ai_complete", "ai_embed"):
        if model is None:
            model = DEFAULT_MODEL if fn == "ai_complete" else DEFAULT_EMBED
            warn("AI_COUNT_TOKENS", NAME, f"{fn} needs a model; using {model!r}")
        lead = [lit(model, NAME)]
    elif fn == "ai_similarity" and model:
        config["model"] = model
    if config:
        extras.append(_object({k: _vendor_value(v) for k, v in config.items()}))
    body = [*lead, _prompt(dataclasses.replace(op, template=head), args), *extras]
    return f"AI_COUNT_TOKENS({lit(fn, NAME)}, {', '.join(body)})"


def _vendor_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


EMITTERS = {
    OpKind.AI_FILTER: _filter,
    OpKind.AI_JOIN: _filter,
    OpKind.AI_CLASSIFY: _classify,
    OpKind.AI_SCORE: _score,
    OpKind.AI_GENERATE: _generate,
    OpKind.AI_EXTRACT: _extract,
    OpKind.AI_AGGREGATE: _aggregate,
    OpKind.AI_EMBED: _embed,
    OpKind.AI_SIMILARITY: _similarity,
    OpKind.AI_COUNT_TOKENS: _count_tokens,
}


def emit(op: AiOp, args: list[str]) -> str:
    return dispatch(EMITTERS, op, args, NAME)

