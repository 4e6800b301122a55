"""ai_similarity: how alike two texts are, on the vendor's range.

Snowflake AI_SIMILARITY (-1..1, https://docs.snowflake.com/en/sql-reference/functions/
ai_similarity), BigQuery AI.SIMILARITY (cosine, -1..1), Databricks ai_similarity (0..1,
https://docs.databricks.com/aws/en/sql/language-manual/functions/ai_similarity), DuckDB
ai_similarity(a, b). A similarity is only written where the target's range is the source's.
"""

from __future__ import annotations

from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind
from quail_engine.sql.dialects import bigquery as bq
from quail_engine.sql.dialects import databricks as dbx
from quail_engine.sql.dialects import duckdb as ddb
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.dialects.common import append, text_prompt
from quail_engine.sql.emit import bigquery as bq_sql
from quail_engine.sql.emit import databricks as dbx_sql
from quail_engine.sql.emit import duckdb as ddb_sql
from quail_engine.sql.emit import snowflake as sf_sql
from quail_engine.sql.emit.common import refuse, similarity_range
from quail_engine.sql.ir import AiOp, OpKind, Options
from quail_engine.sql.literals import options
from quail_engine.sql.validate import Site, known_keys

KINDS = (OpKind.AI_SIMILARITY,)


def _build_snowflake(call: Call) -> Built:
    a = bind(call, Signature(("input1", "input2", "config_object"), 2), sf.NAME)
    config = options(a.get("config_object"), "the config", call.name, sf.NAME)
    known_keys(Site(call.name, call.sql(sf.NAME), sf.NAME), "the config", config, ("model",))
    model = config.pop("model", None)
    prompt = append(text_prompt(a["input1"]), a["input2"])
    return make(OpKind.AI_SIMILARITY, prompt, call, task_args=(("range", "-1..1"),),
                options=Options(model=model, vendor=vendor_items(config)))


def _build_bigquery(call: Call) -> Built:
    a = bind(call, Signature(("content1", "content2"), 2, ("endpoint", "connection_id",
                                                            "model_params")), bq.NAME)
    return make(OpKind.AI_SIMILARITY, append(text_prompt(a["content1"]), a["content2"]), call,
                task_args=(("range", "-1..1"),), options=bq.read_options(a, call))


def _build_databricks(call: Call) -> Built:
    a = bind(call, Signature(("expr1", "expr2"), 2), dbx.NAME)
    return make(OpKind.AI_SIMILARITY, append(text_prompt(a["expr1"]), a["expr2"]), call,
                task_args=(("range", "0..1"),))


def _emit_snowflake(op: AiOp, args: list[str]) -> str:
    if similarity_range(op) != "-1..1":
        raise refuse("ai_similarity", sf_sql.NAME, f"the source similarity ranges over "
                     f"{similarity_range(op)}, Snowflake's AI_SIMILARITY over -1..1", op)
    config = f", {sf_sql.object_text({'model': op.options.model})}" if op.options.model else ""
    return f"AI_SIMILARITY({args[0]}, {args[1]}{config})"


def _emit_bigquery(op: AiOp, args: list[str]) -> str:
    if similarity_range(op) != "-1..1":
        raise refuse("ai_similarity", bq_sql.NAME, f"the source similarity ranges over "
                     f"{similarity_range(op)}, AI.SIMILARITY (cosine) over -1..1", op)
    return (f"AI.SIMILARITY(content1 => {args[0]}, content2 => {args[1]}"
            f"{bq_sql.endpoint(op)})")


def _emit_databricks(op: AiOp, args: list[str]) -> str:
    if similarity_range(op) != "0..1":
        raise refuse("ai_similarity", dbx_sql.NAME, f"the source similarity ranges over "
                     f"{similarity_range(op)}, Databricks' ai_similarity over 0..1", op)
    return f"ai_similarity({args[0]}, {args[1]})"


def _emit_duckdb(op: AiOp, args: list[str]) -> str:
    return ddb_sql.spelled(op, args[:2])


def _notes(op: AiOp, default_max_tokens: int) -> list[str]:
    return ["the model's PMI of the two texts, each read after the other (the same value "
            "whichever comes first; two prompts a row), through a logistic curve onto the "
            "vendor's range, not the cosine of two embeddings"]


PARSE = {
    "snowflake": {"AI_SIMILARITY": _build_snowflake},
    "bigquery": {"AI.SIMILARITY": _build_bigquery},
    "databricks": {"AI_SIMILARITY": _build_databricks},
    "duckdb": {"AI_SIMILARITY": ddb.unary(OpKind.AI_SIMILARITY, 2)},
}
EMIT = {
    "snowflake": _emit_snowflake,
    "bigquery": _emit_bigquery,
    "databricks": _emit_databricks,
    "duckdb": _emit_duckdb,
}
NOTES = _notes
