"""One warehouse call where a rebuilt vendor shape reads the call's value twice.

A shape that keeps a NULL answer NULL (`CASE WHEN v IS NOT NULL THEN json_object('labels',
json_array(v)) END`, sql/shapes.py) names its value two or three times; written around a
warehouse's AI function it would ask the model that many times per row (and bill it). The
value is bound once instead, in each target's idiom:

- BigQuery: `(SELECT <shape of v> FROM UNNEST([<call>]) AS v)`, a correlated subquery over a
  one-element array (NULL elements are allowed inside a query:
  https://cloud.google.com/bigquery/docs/reference/standard-sql/data-types#array_nulls);
- Databricks: `transform(array(<call>), v -> <shape of v>)[0]`, a lambda over a one-element
  array (https://docs.databricks.com/aws/en/sql/language-manual/functions/transform);
- Snowflake: `TRANSFORM(ARRAY_CONSTRUCT(<call>), v -> <shape of v>)[0]`, the same lambda
  (https://docs.snowflake.com/en/sql-reference/functions/transform); another warehouse's shape
  rebuilt there (BigQuery's output_schema STRUCT as an OBJECT) names the call once per field;
- DuckDB: `LIST_TRANSFORM([<call>], LAMBDA v : <shape of v>)[1]`, the same lambda, 1-based
  (https://duckdb.org/docs/stable/sql/functions/lambda). quail plans a statement's identical
  calls as one operator, but the statement is also what a user reads and may run where nothing
  deduplicates them. quail plans this form as one operator too; a correlated `(SELECT <shape>
  FROM (SELECT <call> AS v))` it leaves unplanned (the call runs row by row in DuckDB).
"""

from __future__ import annotations

from sqlglot import exp

VALUE = "quail_v"


def _bigquery(shape: exp.Expr, call: exp.Expr) -> exp.Expr:
    """`(SELECT <shape> FROM UNNEST([<call>]) AS quail_v)`"""
    values = exp.Unnest(expressions=[exp.Array(expressions=[call])],
                        alias=exp.TableAlias(columns=[exp.to_identifier(VALUE)]))
    return exp.Subquery(this=exp.Select(expressions=[shape], from_=exp.From(this=values)))


def _databricks(shape: exp.Expr, call: exp.Expr) -> exp.Expr:
    """`TRANSFORM(ARRAY(<call>), quail_v -> <shape>)[0]`"""
    mapped = exp.Transform(this=exp.Array(expressions=[call]), expression=exp.Lambda(
        this=shape, expressions=[exp.to_identifier(VALUE)]))
    return exp.Bracket(this=mapped, expressions=[exp.Literal.number(0)])


def _snowflake(shape: exp.Expr, call: exp.Expr) -> exp.Expr:
    """`TRANSFORM(ARRAY_CONSTRUCT(<call>), quail_v -> <shape>)[0]`: ARRAY_CONSTRUCT keeps a
    NULL answer as an element, so a NULL answer's shape is still evaluated."""
    mapped = exp.Transform(this=exp.Anonymous(this="ARRAY_CONSTRUCT", expressions=[call]),
                           expression=exp.Lambda(this=shape,
                                                 expressions=[exp.to_identifier(VALUE)]))
    return exp.Bracket(this=mapped, expressions=[exp.Literal.number(0)])


def _duckdb(shape: exp.Expr, call: exp.Expr) -> exp.Expr:
    """`LIST_TRANSFORM([<call>], LAMBDA quail_v : <shape>)[1]`: a NULL answer is an element
    of the list, so its shape is still evaluated."""
    mapped = exp.Transform(this=exp.Array(expressions=[call]), expression=exp.Lambda(
        this=shape, expressions=[exp.to_identifier(VALUE)]))
    return exp.Bracket(this=mapped, expressions=[exp.Literal.number(1)], offset=1)


FORMS = {"bigquery": _bigquery, "databricks": _databricks, "duckdb": _duckdb,
         "snowflake": _snowflake}


def bind_once(tree: exp.Expr, token: str, write: str) -> None:
    """Rewrite, in place, the smallest expression of `tree` naming the call `token()` more
    than once so that it names it once (FORMS[write]); nothing for one mention, for a target
    without a form, or when that expression reads columns of its own (then it is more than a
    shape around one call: the statement's own SQL)."""
    form = FORMS.get(write)
    mentions = [n for n in tree.find_all(exp.Anonymous) if n.name == token]
    if form is None or len(mentions) < 2:
        return
    around = _common_ancestor(mentions)
    while isinstance(around, exp.If) and isinstance(around.parent, exp.Case):
        around = around.parent  # a WHEN branch is no value of its own: its CASE is
    if around is None or isinstance(around, exp.Query) or any(around.find_all(exp.Column)):
        return
    shape = around.copy()
    for node in [n for n in shape.find_all(exp.Anonymous) if n.name == token]:
        node.replace(exp.column(VALUE))
    around.replace(form(shape, exp.Anonymous(this=token)))


def _common_ancestor(nodes: list[exp.Expr]) -> exp.Expr | None:
    chains = []
    for node in nodes:
        chain = []
        while node is not None:
            chain.append(node)
            node = node.parent
        chains.append(chain[::-1])
    common = None
    for level in zip(*chains):
        if any(n is not level[0] for n in level):
            break
        common = level[0]
    return common
