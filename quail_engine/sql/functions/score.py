"""ai_score: a number for a row, read from P(yes) of one prefill on the call's scale.

Snowflake SNOWFLAKE.CORTEX.SENTIMENT (a -1..1 sentiment score,
https://docs.snowflake.com/en/sql-reference/functions/sentiment-snowflake-cortex); BigQuery
AI.SCORE (https://cloud.google.com/bigquery/docs/reference/standard-sql/bigqueryml-syntax-ai-score,
the scale the prompt states); DuckDB ai_score. Databricks has no scoring function: written as
ai_query cast to DOUBLE where a model is named.
"""

from __future__ import annotations

from quail_engine.sql.build import Built, make
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects import bigquery as bq
from quail_engine.sql.dialects import duckdb as ddb
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.dialects.common import text_input
from quail_engine.sql.emit import bigquery as bq_sql
from quail_engine.sql.emit import databricks as dbx_sql
from quail_engine.sql.emit import duckdb as ddb_sql
from quail_engine.sql.emit import snowflake as sf_sql
from quail_engine.sql.emit.common import lit, refuse, similarity_range, task_prefix, warn
from quail_engine.sql.ir import AiOp, OpKind
from quail_engine.sql.scales import range_text, stated_range

KINDS = (OpKind.AI_SCORE,)


def _build_snowflake_sentiment(call: Call) -> Built:
    a = bind(call, Signature(("text",), 1), sf.NAME)
    return make(OpKind.AI_SCORE, text_input(a["text"], call.name, sf.NAME), call,
                task="sentiment", task_args=(("range", "-1..1"),))


def _build_bigquery(call: Call) -> Built:
    a = bind(call, Signature(("prompt",), 1, bq.MANAGED), bq.NAME)
    prompt = text_input(a["prompt"], call.name, bq.NAME)
    # the scale the prompt states ("rate from 1 to 10") is the score's range (sql/scales.py)
    scale = stated_range(prompt.template)
    return make(OpKind.AI_SCORE, prompt, call, options=bq.read_options(a, call),
                task_args=(("range", range_text(*scale)),) if scale else ())


def _emit_snowflake(op: AiOp, args: list[str]) -> str:
    if op.task == "sentiment" and similarity_range(op) == "-1..1":
        return f"SNOWFLAKE.CORTEX.SENTIMENT({sf_sql.prompt_sql(op, args)})"
    raise refuse("ai_score", sf_sql.NAME, "Cortex has no scoring function (AI.SCORE's rubric "
                 "scoring has no equivalent)", op)


def _emit_bigquery(op: AiOp, args: list[str]) -> str:
    prefix = task_prefix(op)
    if prefix:
        warn("SENTIMENT", bq_sql.NAME, "AI.SCORE with a -1..1 sentiment rubric stands in for "
             "the sentiment score")
    return f"AI.SCORE({bq_sql.prompt_sql(op, args, prefix)}{bq_sql.managed('AI.SCORE', op)})"


def _emit_databricks(op: AiOp, args: list[str]) -> str:
    name = dbx_sql.NAME
    if not op.options.model:
        raise refuse("ai_score", name, "Databricks has no scoring function (ai_query needs a "
                     "serving endpoint: set a model)", op)
    warn("ai_score", name, "spelled as ai_query(...) cast to DOUBLE")
    return (f"CAST(ai_query({lit(op.options.model, name)}, "
            f"{dbx_sql.prompt_sql(op, args, task_prefix(op))}) AS DOUBLE)")


def _notes(op: AiOp, default_max_tokens: int) -> list[str]:
    if op.task == "sentiment":
        return ["2 * P(the text is positive) - 1 in -1..1, from one yes/no prefill, not "
                "Snowflake's sentiment model"]
    scale = dict(op.task_args).get("range")
    where = f"placed on the {scale.replace('..', '-')} scale the prompt states" if scale \
        else "in 0..1 (the prompt states no scale)"
    return [f"the probability of a yes answer {where}, not a number the model writes"]


PARSE = {
    "snowflake": {sf.CORTEX + "SENTIMENT": _build_snowflake_sentiment},
    "bigquery": {"AI.SCORE": _build_bigquery},
    "databricks": {},
    "duckdb": {"AI_SCORE": ddb.templated(OpKind.AI_SCORE)},
}
EMIT = {
    "snowflake": _emit_snowflake,
    "bigquery": _emit_bigquery,
    "databricks": _emit_databricks,
    "duckdb": ddb_sql.prompt_call,
}
NOTES = _notes
