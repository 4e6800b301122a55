"""A complete AI join's passing pairs as a DuckDB table, so the final statement joins through
it instead of calling a Python function on every candidate pair.

The final statement re-joins the query's relations and evaluates each AI call once per row it
reaches. Without an equality in the ON condition DuckDB forms the cross product of the two sides
first: a chain of AI joins (QUAIL-B's IMDB-9, reviews-aspects-reviews-aspects) reaches 87 M
candidate rows at its second join and ~300 M at its third, each a row of a Python UDF. For a
complete, keyed, non-negated AI join whose call is a plain conjunct of a JOIN ON or WHERE
condition, the call becomes `(hash(a), hash(b)) IN (SELECT (h0, h1) FROM quail_pass_<id>...)`
over the hashes of the pairs the plan answered TRUE: DuckDB plans that as a hash join (the
chain's 49 M rows in 1.3 s on this 2-core machine, against 181 s as a correlated EXISTS). A pair
the plan never asked is not in the table: FALSE, what the keyed UDF answers for it
(exec/keyed_answers.py; the hashes are one-to-one over the scans' values there too).
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from quail_engine.exec.answer_store import AnswerStore


def eligible(op) -> bool:
    """A non-negated boolean AI join over two or more bindings."""
    return op.op == "ai_join" and not op.negated and len(op.bindings) >= 2


def register_pass_tables(con, ai_ops, store: AnswerStore, keyed: dict, suffix: str
                         ) -> dict[int, str]:
    """Register, for every eligible keyed operator, the DuckDB hashes of its passing binding
    tuples as an Arrow table `quail_pass_<id><suffix>` (columns h0, h1, ...); -> op id -> name."""
    names = {}
    for op_id, maps in keyed.items():
        op = ai_ops[op_id]
        if not eligible(op):
            continue
        inverse = [{(None if v is None else str(v)): h for h, v in m.items()} for m in maps]
        rows = []
        for key, answer in store.answers(op_id):
            if op.passes(answer) and None not in key:
                hashes = tuple(inv.get(v) for inv, v in zip(inverse, key))
                if None not in hashes:  # a value no scan holds: no row can reach it
                    rows.append(hashes)
        columns = {f"h{i}": pa.array([r[i] for r in rows], type=pa.uint64())
                   for i in range(len(maps))}
        name = f"quail_pass_{op_id}{suffix}"
        con.register(name, pa.table(columns))
        names[op_id] = name
    return names


def unregister_pass_tables(con, names) -> None:
    for name in names:
        try:
            con.unregister(name)
        except Exception:  # noqa: BLE001 - already gone
            pass


def is_plain_conjunct(node: exp.Expression) -> bool:
    """`node` decides its JOIN ON or WHERE condition as one of its AND-ed terms (not under NOT,
    OR, a comparison or a function)."""
    parent = node.parent
    while isinstance(parent, (exp.And, exp.Paren)):
        node, parent = parent, parent.parent
    return isinstance(parent, exp.Where) or (isinstance(parent, exp.Join)
                                              and node.arg_key == "on")


def membership(hashed_args: list[exp.Expression], table: str) -> exp.Expression:
    """`(hash(a), hash(b), ...) IN (SELECT (h0, h1, ...) FROM table)`."""
    probe = exp.Tuple(expressions=hashed_args)
    row = exp.Tuple(expressions=[exp.column(f"h{i}") for i in range(len(hashed_args))])
    return exp.In(this=probe, query=exp.select(row).from_(table).subquery())
