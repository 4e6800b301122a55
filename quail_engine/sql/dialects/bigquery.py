"""BigQuery AI functions -> IR: what every BigQuery AI function shares (the sqlglot dialect, the
managed functions' options and examples, `.result`). Each function's builder is in
quail_engine/sql/functions/<kind>.py.

Docs: https://cloud.google.com/bigquery/docs/reference/standard-sql/bigqueryml-syntax-ai-if

sqlglot 30.30 re-parses `AI.*` calls with its own function parsers, so `AI.IF(...)` becomes the
ordinary `IF(cond, a, b)` and `AI.AGG(x, 'i')` fails (facts.md). `QuailBigQuery` parses `AI.*`
calls as plain anonymous calls instead.
"""

from __future__ import annotations

import dataclasses
import json

from sqlglot import exp, parser
from sqlglot.dialects.bigquery import BigQuery
from sqlglot.parsers.bigquery import BigQueryParser
from sqlglot.tokens import TokenType

from quail_engine.sql.build import Built, vendor_items
from quail_engine.sql.call import Call
from quail_engine.sql.dialects.common import untyped_ai
from quail_engine.sql.ir import Options
from quail_engine.sql.literals import (
    gen_params,
    gen_spelling,
    literal,
    options,
    string,
)
from quail_engine.sql.validate import Site, refuse, text

NAME = "bigquery"
MANAGED = ("connection_id", "endpoint", "examples", "embeddings", "optimization_mode",
           "max_error_ratio", "request_type")
# the documented values of the enumerated options (bigqueryml-syntax-ai-generate,
# https://cloud.google.com/bigquery/docs/optimize-ai-functions)
ENUMS = {"request_type": ("shared", "dedicated", "unspecified"),
         "optimization_mode": ("minimize_cost", "maximize_quality")}
class QuailBigQuery(BigQuery):
    class Parser(BigQueryParser):
        FUNCTIONS = untyped_ai(BigQueryParser.FUNCTIONS)

        def _parse_column_ops(self, this: exp.Expr | None) -> exp.Expr | None:
            if (isinstance(this, exp.Column) and not this.table and this.name.upper() == "AI"
                    and self._curr and self._curr.token_type == TokenType.DOT):
                return parser.Parser._parse_column_ops(self, this)
            return super()._parse_column_ops(this)


def read_options(a: dict, call: Call) -> Options:
    endpoint = a.get("endpoint")
    ratio = a.get("max_error_ratio")
    params = options(a.get("model_params"), "model_params", call.name, NAME)
    vendor = {k: (a[k].sql(dialect=NAME) if k == "embeddings" else
                  literal(a[k], k, call.name, NAME))
              for k in ("connection_id", "optimization_mode", "request_type", "embeddings")
              if a.get(k) is not None}
    site = Site(call.name, call.sql(NAME), NAME)
    for key, choices in ENUMS.items():
        if key in vendor:
            text(site, key, vendor[key], choices)
    rest = {k: v for k, v in params.items() if k.lower() not in ("generation_config",
                                                                 "generationconfig")}
    call.spelled.update(gen_spelling(params), model="endpoint")  # (messages: the user's names)
    if rest:
        vendor["model_params"] = rest
    return Options(model=None if endpoint is None else string(endpoint, "endpoint", call.name,
                                                             NAME),
                   max_error_ratio=None if ratio is None else literal(ratio, "max_error_ratio",
                                                                      call.name, NAME),
                   gen=gen_params(params), vendor=vendor_items(vendor))


def read_examples(a: dict, call: Call) -> tuple[tuple[str, str], ...]:
    if a.get("examples") is None:
        return ()
    items = literal(a["examples"], "examples", call.name, NAME)
    if not isinstance(items, list) or not all(isinstance(i, list) and len(i) == 2 for i in items):
        raise refuse(Site(call.name, call.sql(NAME), NAME), "examples",
                     "an array of (input, output) pairs", items)
    return tuple((str(i[0]), json.dumps(i[1])) for i in items)


# vendor function name -> builder(Call) -> Built, filled by quail_engine.sql.functions
FUNCTIONS: dict = {}


def lookup(name: str):
    return FUNCTIONS.get(name)


def is_ai_name(name: str) -> bool:
    return name.startswith("AI.")


def unwrap(built: Built, node: exp.Expr) -> tuple[exp.Expr, str | None, Built]:
    """Strip `.result` from the STRUCT the AI.GENERATE* family returns."""
    parent = node.parent
    if (built.shape == "result_struct" and isinstance(parent, exp.Dot) and parent.this is node
            and parent.expression.name.lower() == "result"):
        op = dataclasses.replace(built.op, wrapper=f"{NAME}:.result")
        return parent, op.wrapper, dataclasses.replace(built, op=op, shape=None)
    return node, None, built
