"""`v[0]` on a JSON value read from Snowflake or Databricks SQL. There a subscript of a VARIANT
array counts from 0, and so does DuckDB's on a JSON value, but sqlglot writes every subscript for
DuckDB's 1-based lists: `GET(v, 'labels')[0]` became `v -> '$.labels'[1]` (which DuckDB reads as
the path '$.labels'[1], the string '$': the whole object) and `EXTRACT_ANSWER(...)[0]` became
`...[1]` (the second answer: NULL). A subscript by a whole number of a JSON-valued expression is
written as a JSON path step instead (`v -> '$[0]'`), which keeps the vendor's count and binds as
one operand."""

from __future__ import annotations

from sqlglot import exp

from quail_engine.sql.placeholder import op_id_of

JSON_VALUED = (exp.GetExtract, exp.JSONExtract, exp.ParseJSON, exp.JSONObject, exp.JSONArray)


def is_json(node: exp.Expr, json_ops: frozenset[int]) -> bool:
    """Whether DuckDB types `node` as JSON: a JSON function or path, a placeholder of an op
    whose result is JSON, or a CASE (the shapes' NULL guard) whose every branch is."""
    if isinstance(node, exp.Paren):
        return is_json(node.this, json_ops)
    if isinstance(node, JSON_VALUED):
        return True
    op = op_id_of(node)
    if op is not None and isinstance(node, exp.Anonymous):
        return op in json_ops
    if isinstance(node, exp.Case):
        branches = [i.args.get("true") for i in node.args.get("ifs") or []]
        branches.append(node.args.get("default"))
        present = [b for b in branches if b is not None and not isinstance(b, exp.Null)]
        return bool(present) and all(is_json(b, json_ops) for b in present)
    return False


def json_subscripts(tree: exp.Expr, json_ops: frozenset[int]) -> None:
    """Rewrite, in place, each `x[n]` (n a whole-number literal) of a JSON-valued x as
    `x -> '$[n]'`."""
    for bracket in list(tree.find_all(exp.Bracket)):
        index = bracket.expressions
        if len(index) != 1 or not isinstance(index[0], exp.Literal) or index[0].is_string:
            continue
        text = str(index[0].this)
        if not text.isdigit() or not is_json(bracket.this, json_ops):
            continue
        path = exp.JSONPath(expressions=[exp.JSONPathRoot(), exp.JSONPathSubscript(this=int(text))])
        bracket.replace(exp.JSONExtract(this=bracket.this.copy(), expression=path))
