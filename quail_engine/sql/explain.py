"""The logical plan of a statement, as text or JSON (`quail explain`). The planner extends the
JSON built here (costs, --analyze) rather than re-deriving it."""

from __future__ import annotations

import dataclasses
from typing import Any

from quail_engine.sql.ir import placeholder_name
from quail_engine.sql.query import ParsedQuery, parse


def explain_json(q: ParsedQuery) -> dict[str, Any]:
    """{dialect, ai_operators: [{id, op, template, bindings: [{alias, column, sql}], labels, ...}],
    cores, table_functions, duckdb_sql}."""
    planned = {i for c in q.cores for i in (*c.filters, *c.joins, *c.projections, *c.aggregates)}
    operators = []
    for i, op in enumerate(q.ai_ops):
        item = {"id": i, "op": op.op, "template": op.template,
                "bindings": [{"index": b.index, "alias": b.alias, "column": b.column,
                              "sql": b.sql, "type": b.type} for b in op.bindings],
                "labels": None if op.labels is None else [
                    {"name": lb.name, "description": lb.description} for lb in op.labels],
                "output_type": op.output_type, "context": op.context, "wrapper": op.wrapper,
                "task": op.task, "task_args": dict(op.task_args), "instruction": op.instruction,
                "multi": op.multi,
                "join": None if op.join is None else op.join.to_json(),
                "options": _plain(op.options), "placeholder": placeholder_name(i),
                "text": op.to_text(), "origin": op.origin, "is_planned": i in planned}
        operators.append(item)
    cores = [{"relations": [_relation(r) for r in c.relations],
              "filters": list(c.filters), "joins": list(c.joins),
              "projections": list(c.projections), "aggregates": list(c.aggregates),
              "keys": [k.to_json() for k in c.keys],
              "seen_through": [_seen(i, op) for i, op in c.ops]} for c in q.cores]
    return {"dialect": q.dialect, "ai_operators": operators, "cores": cores,
            "table_functions": list(q.table_functions), "duckdb_sql": q.duckdb_sql}


def explain_text(q: ParsedQuery) -> str:
    """Operators (marked `unplanned` when DuckDB alone evaluates them: under OR, in an
    outer join's ON, over a group's aggregate), cores with their scans, and the DuckDB SQL."""
    planned = {i for c in q.cores for i in (*c.filters, *c.joins, *c.projections, *c.aggregates)}
    lines = [f"dialect: {q.dialect}", "ai operators:"]
    lines += [f"  #{i} [{op.context}{'' if i in planned else ', unplanned'}] {op.to_text()}"
              for i, op in enumerate(q.ai_ops)]
    if not q.ai_ops:
        lines.append("  (none)")
    lines.append("cores:")
    for n, core in enumerate(q.cores):
        lines.append(f"  core {n}: filters={list(core.filters)} joins={list(core.joins)} "
                     f"projections={list(core.projections)} aggregates={list(core.aggregates)}")
        for rel in core.relations:
            lines.append(f"    {rel.alias}: {rel.scan_sql}")
        for i, op in core.ops:  # a CTE's operators this core plans (sql/label_ctes.py)
            seen = _seen(i, op)
            lines.append(f"    #{i} seen through its CTE: reads {', '.join(seen['bindings'])}"
                         + (f"; rows pass with labels {seen['pass_labels']}"
                            if seen["pass_labels"] is not None else ""))
    if not q.cores:
        lines.append("  (none)")
    lines += ["duckdb sql:", f"  {q.duckdb_sql}"]
    return "\n".join(lines)


def explain(sql: str, dialect: str, fmt: str = "text") -> str | dict[str, Any]:
    q = parse(sql, dialect)
    return explain_json(q) if fmt == "json" else explain_text(q)


def _seen(op_id: int, op) -> dict[str, Any]:
    return {"id": op_id, "bindings": [b.sql for b in op.bindings],
            "pass_labels": None if op.pass_labels is None else list(op.pass_labels)}


def _relation(rel) -> dict[str, Any]:
    """A relation's fields, its scan as the text (the tree is no JSON)."""
    return {f.name: getattr(rel, f.name) for f in dataclasses.fields(rel)
            if not f.metadata.get("tree")}


def _plain(options) -> dict[str, Any]:
    out = dataclasses.asdict(options)
    out["gen"]["stop"] = list(out["gen"]["stop"])
    out["vendor"] = dict(options.vendor)
    return out
