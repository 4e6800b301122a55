"""A complete AI join's passing pairs as a DuckDB table, so the final statement joins through
it instead of calling a Python function on every candidate pair.

The final statement re-joins the query's relations and evaluates each AI call once per row it
reaches. Without an equality in the ON condition DuckDB forms the cross product of the two sides
first: a chain of AI joins (reviews-aspects-reviews-aspects) multiplies its candidate rows at
every join, each a row of a Python UDF. For a
complete, keyed, non-negated AI join whose call is a plain conjunct of an inner JOIN's ON or of
the WHERE, the statement joins `(SELECT DISTINCT h0, h1 FROM quail_pass_<id>...)` on the
arguments' hashes (`pass_through`): DuckDB orders hash joins and forms only the rows out. In an
outer join's ON the call becomes `(hash(a), hash(b)) IN (SELECT (h0, h1) FROM
quail_pass_<id>...)` (a semi join on the candidate rows, far cheaper than a correlated
EXISTS). A pair the plan never asked is not in the table:
FALSE, what the keyed UDF answers for it (exec/keyed_answers.py; the hashes are one-to-one over
the scans' values there too).

Each side's hash is computed once per row of its relation, not once per candidate row: a table
the membership reads (`reviews AS r2`) becomes `(SELECT *, hash(CAST(body AS TEXT)) AS
quail_h_r2_0 FROM reviews) AS r2` and a star over it excludes the added column. Inline, DuckDB
hashes each long text once per row of the cross product it probes, which dominates the final
statement.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.sql.op_kinds import OpKind


def eligible(op) -> bool:
    """A non-negated boolean AI join over two or more bindings."""
    return op.op == OpKind.AI_JOIN and not op.negated and len(op.bindings) >= 2


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


HASH_COLUMN = "quail_h_"
_EXCEPT = "except_" if "except_" in exp.Star.arg_types else "except"  # sqlglot renamed them
_FROM = "from_" if "from_" in exp.Select.arg_types else "from"


def hashed(arg: exp.Expression) -> exp.Expression:
    """`hash(arg)`, read from a column its relation computes once per row where `arg` reads one
    column of a table the same SELECT names by alias (see the module's note); inline where
    not."""
    inline = exp.Anonymous(this="hash", expressions=[arg.copy()])  # (a copy: `arg` stays put)
    columns = list(arg.find_all(exp.Column))
    if len(columns) != 1 or not columns[0].table or isinstance(columns[0].this, exp.Star):
        return inline
    select = arg.find_ancestor(exp.Select)
    ref = _relation(select, columns[0].table) if select is not None else None
    if ref is None:
        return inline
    alias = columns[0].args["table"]
    if isinstance(ref, exp.Table):
        inner = ref.copy()
        inner.set("alias", None)
        sub = exp.Subquery(this=exp.select(exp.Star()).from_(inner),
                           alias=exp.TableAlias(this=alias.copy()))
        sub.meta["quail_hashes"] = {}
        ref.replace(sub)
        ref = sub
    bare = arg.copy()
    for col in bare.find_all(exp.Column):
        col.set("table", None)
    hashes = ref.meta["quail_hashes"]
    key = bare.sql(dialect="duckdb")
    if key not in hashes:
        hashes[key] = f"{HASH_COLUMN}{alias.name}_{len(hashes)}"
        ref.this.select(exp.alias_(exp.Anonymous(this="hash", expressions=[bare]),
                                   hashes[key], quoted=True), copy=False)
        _exclude_from_stars(select, alias.name, hashes[key])
    return exp.column(hashes[key], table=alias.copy(), quoted=True)


def _relation(select: exp.Select, alias: str) -> exp.Expression | None:
    """The plain table (or a subquery `hashed` made of one) `select` names `alias`, if any."""
    sources = [select.args[_FROM].this] if select.args.get(_FROM) else []
    sources += [j.this for j in select.args.get("joins") or []]
    for ref in sources:
        if ref.alias_or_name != alias:
            continue
        if isinstance(ref, exp.Subquery) and "quail_hashes" in ref.meta:
            return ref
        table_alias = ref.args.get("alias")
        if isinstance(ref, exp.Table) and isinstance(ref.this, exp.Identifier) and not (
                table_alias is not None and table_alias.columns):
            return ref
        return None
    return None


def _exclude_from_stars(select: exp.Select, alias: str, name: str) -> None:
    """`*` and `alias.*` among `select`'s projections leave out the added column `name`."""
    for proj in select.expressions:
        star = proj if isinstance(proj, exp.Star) else (
            proj.this if isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)
            and proj.table == alias else None)
        if star is not None:
            star.set(_EXCEPT, [*(star.args.get(_EXCEPT) or []), exp.column(name, quoted=True)])


def membership(hashed_args: list[exp.Expression], table: str) -> exp.Expression:
    """`(hash(a), hash(b), ...) IN (SELECT (h0, h1, ...) FROM table)`."""
    probe = exp.Tuple(expressions=hashed_args)
    row = exp.Tuple(expressions=[exp.column(f"h{i}") for i in range(len(hashed_args))])
    return exp.In(this=probe, query=exp.select(row).from_(table).subquery())


PASS_ALIAS = "quail_p_"


def pass_through(call: exp.Expression, args: list[exp.Expression], table: str) -> bool:
    """Replace the AI join `call` (a plain conjunct: `is_plain_conjunct`) by an inner join of
    its SELECT with the passing pairs, equal on each argument's hash, where that is the same
    rows: a conjunct of an inner JOIN's ON (the pass join right after that join) or of the
    WHERE (after every join). `args`: `call`'s arguments as `hashed` made them. Returns
    whether it did; else the caller keeps a `membership` test.

    The membership test is a semi join DuckDB evaluates on every candidate row, many times
    the rows out for a chain of joins; joined through the pairs, DuckDB orders hash joins on
    the hashes and forms only the rows out."""
    parent = call.parent
    while isinstance(parent, (exp.And, exp.Paren)):
        parent = parent.parent
    select = parent.parent if isinstance(parent, (exp.Where, exp.Join)) else None
    if not isinstance(select, exp.Select):
        return False
    joins = list(select.args.get("joins") or [])
    if isinstance(parent, exp.Join):
        if parent.side or (parent.kind or "INNER").upper() not in ("INNER", "CROSS"):
            return False  # an outer (or semi/anti) join's condition: not a filter of rows
        at = next(i for i, j in enumerate(joins) if j is parent) + 1
    else:
        at = len(joins)
    n = sum(1 for j in joins if j.alias_or_name.startswith(PASS_ALIAS))
    alias = f"{PASS_ALIAS}{n}"
    cols = [f"{alias}_h{i}" for i in range(len(args))]
    pairs = exp.select(*(exp.alias_(exp.column(f"h{i}"), c, quoted=True)
                         for i, c in enumerate(cols))).from_(table).distinct()
    on = exp.and_(*(exp.EQ(this=exp.column(c, table=alias, quoted=True), expression=a.copy())
                    for c, a in zip(cols, args)))
    join = exp.Join(this=exp.Subquery(this=pairs, alias=exp.TableAlias(
        this=exp.to_identifier(alias, quoted=True))), on=on)
    call.replace(exp.true())
    joins.insert(at, join)
    select.set("joins", joins)
    for c in cols:
        _exclude_from_stars(select, alias, c)
    return True
