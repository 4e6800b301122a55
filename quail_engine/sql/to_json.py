"""BigQuery's `TO_JSON(x)` in DuckDB SQL.

BigQuery's TO_JSON returns a JSON value: over a STRUCT, an object
(https://cloud.google.com/bigquery/docs/reference/standard-sql/json_functions#to_json);
TO_JSON_STRING returns its text. sqlglot reads both as one node and writes each for DuckDB as
`CAST(TO_JSON(x) AS TEXT)`, so TO_JSON gave VARCHAR, and a JSON object built around it (the
`response` of a Snowflake AI_EXTRACT transpiled into BigQuery and run back) held a JSON string
of the object, whose fields no path reads. Here TO_JSON becomes DuckDB's `to_json(x)`, typed
JSON, for a run and for a transpile into DuckDB; TO_JSON_STRING stays text.
"""

from __future__ import annotations

from sqlglot import exp

from quail_engine.sql.call import fragment
from quail_engine.sql.errors import UnsupportedError

NAME = "bigquery"


def lower_to_json(tree: exp.Expr) -> None:
    """Replace, in place, every TO_JSON of a BigQuery statement by DuckDB's JSON-typed
    to_json."""
    for node in list(tree.find_all(exp.JSONFormat)):
        if not node.args.get("to_json"):
            continue
        if node.args.get("options") is not None:
            raise UnsupportedError("TO_JSON's stringify_wide_numbers is not supported (numbers "
                                   "are written as JSON numbers)", fragment(node, NAME), NAME)
        node.replace(exp.Anonymous(this="to_json", expressions=[node.this.copy()]))
