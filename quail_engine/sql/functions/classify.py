"""ai_classify: one label (or several, multi-label) out of a list, and the sentiment functions
that are a classification over fixed labels.

Snowflake AI_CLASSIFY, CLASSIFY_TEXT, AI_SENTIMENT
(https://docs.snowflake.com/en/sql-reference/functions/ai_classify); BigQuery AI.CLASSIFY
(https://cloud.google.com/bigquery/docs/reference/standard-sql/bigqueryml-syntax-ai-classify);
Databricks ai_classify v1/v2 and ai_analyze_sentiment
(https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_classify); DuckDB
ai_classify.
"""

from __future__ import annotations

import dataclasses
import json

from sqlglot import exp

from quail_engine.sql.build import SENTIMENT_LABELS, Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects import bigquery as bq
from quail_engine.sql.dialects import databricks as dbx
from quail_engine.sql.dialects import duckdb as ddb
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.dialects.common import Wrapper, text_input
from quail_engine.sql.emit import bigquery as bq_sql
from quail_engine.sql.emit import databricks as dbx_sql
from quail_engine.sql.emit import duckdb as ddb_sql
from quail_engine.sql.emit import snowflake as sf_sql
from quail_engine.sql.emit.common import (
    example_outputs,
    labels_json,
    lit,
    refuse_aspects,
    warn,
)
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import AiOp, Label, OpKind, Options
from quail_engine.sql.literals import labels, options, string
from quail_engine.sql.validate import (
    Site,
    boolean,
    known_keys,
    label_count,
    refuse,
    text,
)

KINDS = (OpKind.AI_CLASSIFY,)
# the documented keys of each options object (a misspelled key is refused, not ignored)
SNOWFLAKE_KEYS = ("task_description", "output_mode", "examples")
SNOWFLAKE_TEXT_KEYS = ("task_description",)
# https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_classify (v2 options)
DATABRICKS_KEYS = ("version", "instructions", "multilabel")


def _build_snowflake(call: Call, legacy: bool = False) -> Built:
    names = ("input", "list_of_categories", "config_object", "return_error_details")
    a = bind(call, Signature(names, 2, ("categories", "config", "options")), sf.NAME)
    cats = a.get("list_of_categories", a.get("categories"))
    config = options(a.get("config_object", a.get("config", a.get("options"))), "the config",
                     call.name, sf.NAME)
    site = Site(call.name, call.sql(sf.NAME), sf.NAME)
    known_keys(site, "the options" if legacy else "the config", config,
               SNOWFLAKE_TEXT_KEYS if legacy else SNOWFLAKE_KEYS)
    found = labels(cats, call.name, sf.NAME, min_count=2)
    label_count(site, found, 100 if legacy else 500)
    is_multi = text(site, "output_mode", config.pop("output_mode", "single"),
                    ("single", "multi")) == "multi"
    examples = config.pop("examples", None) or []
    if not isinstance(examples, list) or not all(isinstance(e, dict) for e in examples):
        raise refuse(site, "examples", "a list of {'input': ..., 'labels': [...]} objects",
                     examples)
    examples = tuple((str(e.get("input")), json.dumps(e.get("labels"))) for e in examples)
    instruction = config.pop("task_description", None)
    call.spelled["instruction"] = "task_description"  # (messages: the user's name)
    on_error, details = sf.read_on_error(a, call)
    base = "label_object" if legacy else ("labels_object_multi" if is_multi else "labels_object")
    return make(OpKind.AI_CLASSIFY, text_input(a["input"], call.name, sf.NAME), call,
                shape=sf.compose(details, base), labels=found,
                multi=is_multi, instruction=instruction, examples=examples,
                options=Options(on_error=on_error, vendor=vendor_items(config)))


def _build_snowflake_text(call: Call) -> Built:
    return _build_snowflake(call, legacy=True)


def _build_snowflake_sentiment(call: Call) -> Built:
    a = bind(call, Signature(("text", "categories", "return_error_details"), 1), sf.NAME)
    if isinstance(a.get("categories"), exp.Boolean):
        a["return_error_details"] = a.pop("categories")
    on_error, details = sf.read_on_error(a, call)
    sentiments = tuple(Label(x) for x in SENTIMENT_LABELS[sf.NAME])
    if a.get("categories") is not None:
        # the answer is the whole {"categories": [overall, then each aspect]} object: the
        # executor asks each aspect's sentiment over the same document (exec: aspects)
        aspects = [lb.name for lb in labels(a["categories"], call.name, sf.NAME)]
        site = Site(call.name, call.sql(sf.NAME), sf.NAME)
        if len(aspects) > 10 or any(len(x) > 30 for x in aspects):
            raise refuse(site, "categories", "at most 10 names of at most 30 characters",
                         aspects)
        return make(OpKind.AI_CLASSIFY, text_input(a["text"], call.name, sf.NAME), call,
                    shape=sf.compose(details, None), task="sentiment", labels=sentiments,
                    output_type="JSON", task_args=(("aspects", json.dumps(aspects)),),
                    options=Options(on_error=on_error))
    return make(OpKind.AI_CLASSIFY, text_input(a["text"], call.name, sf.NAME), call,
                shape=sf.compose(details, "sentiment_object"), task="sentiment",
                labels=sentiments, options=Options(on_error=on_error))


def _build_bigquery(call: Call) -> Built:
    a = bind(call, Signature(("input", "categories"), 2, (*bq.MANAGED, "output_mode")), bq.NAME)
    mode = a.get("output_mode")
    mode = None if mode is None else text(Site(call.name, call.sql(bq.NAME), bq.NAME),
                                          "output_mode",
                                          string(mode, "output_mode", call.name, bq.NAME),
                                          ("single", "multi"))
    opts = bq.read_options(a, call)
    if mode == "single":
        opts = dataclasses.replace(opts, vendor=(*opts.vendor, ("output_mode", "single")))
    return make(OpKind.AI_CLASSIFY, text_input(a["input"], call.name, bq.NAME), call,
                shape="list1" if mode == "single" else None,
                labels=labels(a["categories"], call.name, bq.NAME, min_count=2),
                multi=mode == "multi", options=opts, examples=bq.read_examples(a, call))


def _build_databricks(call: Call) -> Built:
    a = bind(call, Signature(("content", "labels", "options"), 2), dbx.NAME)
    prompt = text_input(a["content"], call.name, dbx.NAME)
    found = labels(a["labels"], call.name, dbx.NAME, min_count=2)
    site = Site(call.name, call.sql(dbx.NAME), dbx.NAME)
    if isinstance(a["labels"], exp.Array):
        label_count(site, found, 20, "with an ARRAY of labels (v1)")
        if a.get("options") is not None:  # (v1 has none: an ignored multilabel is a wrong answer)
            raise ArgumentError(f"{call.name} with an ARRAY of labels (v1) takes no options; "
                                "write the labels as a JSON string for options (v2): "
                                "ai_classify(content, '[\"a\", \"b\"]', map(...))",
                                site.sql, site.dialect)
        return make(OpKind.AI_CLASSIFY, prompt, call, labels=found)
    label_count(site, found, 500, "with JSON labels (v2)")
    opts = {k: str(v) for k, v in options(a.get("options"), "options", call.name,
                                          dbx.NAME).items()}
    known_keys(site, "the options", opts, DATABRICKS_KEYS)
    is_multi = boolean(Site(call.name, call.sql(dbx.NAME), dbx.NAME), "multilabel",
                       opts.pop("multilabel", "false"))
    call.spelled["instruction"] = "instructions"  # (messages: the user's name)
    return make(OpKind.AI_CLASSIFY, prompt, call, labels=found, multi=is_multi,
                shape="response_object_multi" if is_multi else "response_object",
                instruction=opts.pop("instructions", None),
                options=Options(vendor=vendor_items({"labels_json": "true", **opts})))


def _build_databricks_sentiment(call: Call) -> Built:
    a = bind(call, Signature(("content",), 1), dbx.NAME)
    return make(OpKind.AI_CLASSIFY, text_input(a["content"], call.name, dbx.NAME), call,
                task="sentiment", labels=tuple(Label(x) for x in SENTIMENT_LABELS[dbx.NAME]))


def _build_duckdb(call: Call) -> Built:
    ddb.check_count(call, 2)
    opts, fields, task_args = ddb.named_args(call)
    ddb.check_once(call, fields, "labels")
    return make(OpKind.AI_CLASSIFY, ddb.read_prompt(call, call.args[:1]), call, options=opts,
                labels=labels(call.args[1], call.name, ddb.NAME, min_count=2),
                task_args=task_args, **fields)


def _emit_snowflake(op: AiOp, args: list[str]) -> str:
    name = sf_sql.NAME
    sf_sql.no_model("AI_CLASSIFY", op)
    names = tuple(lb.name for lb in op.labels or ())
    prompt = sf_sql.prompt_sql(op, args)
    if op.task == "sentiment":
        if names != SENTIMENT_LABELS[name]:
            warn("AI_SENTIMENT", name, f"labels {list(names)} become Snowflake's "
                 f"{list(SENTIMENT_LABELS[name])}")
        aspects = dict(op.task_args).get("aspects")
        if aspects is not None:  # the whole {"categories": [...]} object, as the call answers
            return f"AI_SENTIMENT({prompt}, {sf_sql.value_text(json.loads(aspects))})"
        return f"AI_SENTIMENT({prompt}):categories[0]:sentiment::STRING"
    cats = ", ".join(sf_sql.object_text({"label": lb.name, "description": lb.description})
                     if lb.description else lit(lb.name, name) for lb in op.labels)
    config = {}
    if op.instruction:
        config["task_description"] = op.instruction
    if op.multi:
        config["output_mode"] = "multi"
    if op.examples:  # {'input', 'labels'}: a BigQuery example's one label becomes a list
        config["examples"] = [{"input": text, "labels": out if isinstance(out, list) else [out]}
                              for text, out in example_outputs(op)]
    extra = f", {sf_sql.object_text(config)}" if config else ""
    path = ":labels" if op.multi else ":labels[0]::STRING"
    return f"AI_CLASSIFY({prompt}, [{cats}]{extra}){path}"


def _emit_bigquery(op: AiOp, args: list[str]) -> str:
    name = bq_sql.NAME
    if op.task == "sentiment":
        refuse_aspects("AI_SENTIMENT", name, op)
        warn("sentiment", name, "AI.CLASSIFY over the sentiment labels stands in for the "
             "vendor's sentiment function")
    if op.instruction:
        warn("AI.CLASSIFY", name, "AI.CLASSIFY has no task description; it is dropped")
    cats = ", ".join(f"STRUCT({lit(lb.name, name)} AS label, {lit(lb.description, name)} AS "
                     f"description)" if lb.description else lit(lb.name, name)
                     for lb in op.labels)
    mode = ", output_mode => 'multi'" if op.multi else ""
    return (f"AI.CLASSIFY({bq_sql.prompt_sql(op, args)}, categories => [{cats}]{mode}"
            f"{bq_sql.examples_sql(op)}{bq_sql.managed('AI.CLASSIFY', op)})")


def _emit_databricks(op: AiOp, args: list[str]) -> str:
    name = dbx_sql.NAME
    names = tuple(lb.name for lb in op.labels)
    if op.task == "sentiment":
        refuse_aspects("AI_SENTIMENT", name, op)
        if names != SENTIMENT_LABELS[name]:
            warn("ai_analyze_sentiment", name, f"labels {list(names)} become Databricks' "
                 f"{list(SENTIMENT_LABELS[name])}")
        return f"ai_analyze_sentiment({dbx_sql.prompt_sql(op, args)})"
    if op.options.model:
        warn("ai_classify", name, f"task functions choose their own model; "
             f"{op.options.model!r} is dropped")
    is_v1 = (not op.multi and not op.instruction and len(names) <= 20
             and not any(lb.description for lb in op.labels))
    if is_v1:
        return (f"ai_classify({dbx_sql.prompt_sql(op, args)}, "
                f"ARRAY({', '.join(lit(n, name) for n in names)}))")
    opts = []
    if op.multi:
        opts += ["'multilabel'", "'true'"]
    if op.instruction:
        opts += ["'instructions'", lit(op.instruction, name)]
    extra = f", map({', '.join(opts)})" if opts else ""
    path = ":response" if op.multi else ":response[0]"
    return (f"ai_classify({dbx_sql.prompt_sql(op, args)}, {lit(labels_json(op), name)}"
            f"{extra}){path}")


def _emit_duckdb(op: AiOp, args: list[str]) -> str:
    return ddb_sql.spelled(op, [ddb_sql.prompt_sql(op, args), ddb_sql.labels_sql(op)],
                           positional_fields=("labels",))


def _notes(op: AiOp, default_max_tokens: int) -> list[str]:
    if not op.multi:
        return []
    return ["multi-label: one decision per label over the same document (on the default "
            "model a likelihood threshold chosen on labelled data), not the vendor's model"]


PARSE = {
    "snowflake": {
        "AI_CLASSIFY": _build_snowflake,
        "AI_SENTIMENT": _build_snowflake_sentiment,
        sf.CORTEX + "CLASSIFY_TEXT": _build_snowflake_text,
    },
    "bigquery": {"AI.CLASSIFY": _build_bigquery},
    "databricks": {
        "AI_CLASSIFY": _build_databricks,
        "AI_ANALYZE_SENTIMENT": _build_databricks_sentiment,
    },
    "duckdb": {"AI_CLASSIFY": _build_duckdb},
}
EMIT = {
    "snowflake": _emit_snowflake,
    "bigquery": _emit_bigquery,
    "databricks": _emit_databricks,
    "duckdb": _emit_duckdb,
}
# the result wrappers the vendors put around a classification (stripped when read)
WRAPPERS = {
    "snowflake": {
        "labels_object": {"labels[0]": Wrapper("labels[0]"),
                          "labels": Wrapper("labels", "list1")},
        "labels_object_multi": {"labels": Wrapper("labels")},
        "label_object": {"label": Wrapper("label")},
        "sentiment_object": {"categories[0].sentiment": Wrapper("categories[0].sentiment")},
    },
    "databricks": {
        "response_object": {"response[0]": Wrapper("response[0]"),
                            "response": Wrapper("response", "list1")},
        "response_object_multi": {"response": Wrapper("response")},
    },
}
NOTES = _notes
