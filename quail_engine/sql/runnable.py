"""Forms quail reads but cannot run, refused when a query is read for running (explain, query,
dbt), not later by DuckDB: an image or file argument, embeddings, forecasting, vector search,
extraction confidence scores; few-shot examples, which the model is not shown, are warned about.
Each refusal is an UnsupportedError naming the function and the reason, quoting the SQL.
Transpile reads these forms (it runs nothing) and does not call this module.
"""

from __future__ import annotations

import logging

from sqlglot import exp

from quail_engine.sql.build import Built
from quail_engine.sql.call import fragment
from quail_engine.sql.errors import UnsupportedError
from quail_engine.sql.op_kinds import OpKind, spec

TEXT_ONLY = "quail runs a local language model over text values, not images or files"
log = logging.getLogger(__name__)
NO_EMBEDDINGS = spec(OpKind.AI_EMBED).refusal
NO_FORECAST = "forecasting needs a time-series model; quail runs a language model only"
NO_VECTOR_SEARCH = "vector search needs embeddings and a vector index; quail has neither"

NO_SCORES = ("quail decodes each field under the schema and keeps no confidence per field "
             "(the vendor's 'scoring' object); leave scores out")

FILE_FUNCTIONS = ("TO_FILE", "FL_GET_FILE")
# sqlglot's own nodes for table functions quail cannot run -> (name, reason)
TABLE_FUNCTIONS = {
    exp.AIForecast: ("AI.FORECAST", NO_FORECAST),
    exp.MLForecast: ("ML.FORECAST", NO_FORECAST),
    exp.GenerateEmbedding: ("GENERATE_EMBEDDING", NO_EMBEDDINGS),
    exp.VectorSearch: ("VECTOR_SEARCH", NO_VECTOR_SEARCH),
}


def refuse_table_functions(tree: exp.Expr, dialect: str) -> None:
    """Refuse the first table function of `tree` quail cannot run."""
    for node in tree.find_all(*TABLE_FUNCTIONS):
        name, reason = TABLE_FUNCTIONS[type(node)]
        table = node.parent
        prefix = table.args.get("db") if isinstance(table, exp.Table) else None
        if name == "GENERATE_EMBEDDING":
            name = f"{prefix.name.upper() if prefix else 'ML'}.{name}"
        quoted = table if isinstance(table, exp.Table) else node
        raise UnsupportedError(f"{name} is not supported: {reason}", fragment(quoted, dialect),
                               dialect)


def refuse_op(built: Built, name: str, node: exp.Expr, dialect: str) -> None:
    """Refuse the AI call `node` when it needs an embedding model or reads an image or file
    (a vendor FILE argument, or TO_FILE / FL_GET_FILE anywhere in its arguments)."""
    origin = fragment(node, dialect)
    refusal = spec(built.op.op).refusal
    if refusal is not None:
        raise UnsupportedError(f"{name} is not supported: {refusal}", origin, dialect)
    if ("scores", "true") in built.op.task_args:
        raise UnsupportedError(f"{name} with scores => TRUE is not supported: {NO_SCORES}",
                               origin, dialect)
    if built.op.examples:
        log.warning("%s: its %d examples are not shown to the model; quail asks without them",
                    name, len(built.op.examples))
    media = [e for b, e in zip(built.op.bindings, built.exprs) if b.modality != "text"]
    media += [n for n in node.walk() if isinstance(n, exp.ToFile) or (
        isinstance(n, exp.Anonymous) and n.name.upper() in FILE_FUNCTIONS) or _is_object_ref(n)]
    if media:
        raise UnsupportedError(f"{name} with a file argument ({fragment(media[0], dialect)}) is "
                               f"not supported: {TEXT_ONLY}", origin, dialect)


def _is_object_ref(node: exp.Expr) -> bool:
    """BigQuery's `OBJ.MAKE_REF(...)`, `OBJ.GET_ACCESS_URL(...)`, ...: an ObjectRef (a file in
    Cloud Storage), https://cloud.google.com/bigquery/docs/reference/standard-sql/objectref_functions"""
    return (isinstance(node, exp.Dot) and isinstance(node.this, exp.Column | exp.Identifier)
            and node.this.name.upper() == "OBJ" and isinstance(node.expression, exp.Anonymous))
