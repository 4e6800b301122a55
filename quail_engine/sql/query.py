"""`parse(sql, dialect)`: a warehouse statement as AI operators, cores and DuckDB SQL.

Execution contract: DuckDB runs `duckdb_sql`, the whole statement in which each AI call is
`quail_ai_<id>(<binding expressions>)` returning the op's `output_type` (BOOLEAN, VARCHAR,
VARCHAR[], DOUBLE, BIGINT, JSON, FLOAT[]); aggregate ops take `list(<binding>)` per group.
The planner precomputes answers for the `cores`; BigQuery table functions are subqueries
mapping `quail_ai_<id>(prompt)` over their input (ids in `table_functions`). `statement()` is
the same statement as the tree the executor runs (the lowered tree with every AI call's
arguments cast to VARCHAR, the text the scans and the functions see): the executor never parses
SQL, and `duckdb_sql` is never read back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from quail_engine.sql import column_names, dialects
from quail_engine.sql.build import AGGREGATE_OPS
from quail_engine.sql.cores import Core, extract_cores
from quail_engine.sql.dialects.common import TEXT_TYPES
from quail_engine.sql.errors import SqlError
from quail_engine.sql.flatten import lower_flatten
from quail_engine.sql.from_json import lower_from_json
from quail_engine.sql.ir import AiOp
from quail_engine.sql.json_subscripts import json_subscripts
from quail_engine.sql.lower import Lowered, lower
from quail_engine.sql.nesting import check_nesting, deep_stack, nesting_guard
from quail_engine.sql.op_kinds import spec
from quail_engine.sql.placeholder import op_id_of, placeholder_id
from quail_engine.sql.to_json import lower_to_json

log = logging.getLogger(__name__)


QUERY_STATEMENTS = (exp.Query, exp.Values, exp.Describe, exp.Show)


@dataclass(frozen=True)
class ParsedQuery:
    dialect: str
    source_sql: str
    ai_ops: tuple[AiOp, ...]        # op id = index
    duckdb_sql: str
    cores: tuple[Core, ...]
    table_functions: tuple[int, ...] = ()
    # the lowered statement `duckdb_sql` was written from; statement() copies it
    tree: exp.Expr | None = field(default=None, compare=False, repr=False)

    def statement(self) -> exp.Expression:
        """The tree the executor runs (`runnable(tree)`), built on first use and kept: explain
        and transpile never need it."""
        tree = self.__dict__.get("_statement")
        if tree is None:
            tree = (runnable(self.tree, self.group_ops) if self.tree is not None
                    else statement_tree(self.duckdb_sql, self.group_ops))
            object.__setattr__(self, "_statement", tree)
        return tree

    @property
    def group_ops(self) -> frozenset[int]:
        """Ids of the aggregate operators, whose arguments are their groups' lists."""
        return frozenset(i for i, op in enumerate(self.ai_ops) if spec(op.op).is_aggregate)

    def check_query(self) -> None:
        """Refuse a statement that is not a query (COPY, CREATE, INSERT, INSTALL, SET, ATTACH,
        ...): a SqlError naming its kind and quoting it."""
        tree = self.statement()
        if isinstance(tree, QUERY_STATEMENTS):
            return
        kind = (tree.name.split()[0] if isinstance(tree, exp.Command) else tree.key).upper()
        raise SqlError(f"quail query runs queries (SELECT, WITH, VALUES, DESCRIBE, SHOW), not "
                       f"{kind} statements; write a result with --output", self.source_sql,
                       self.dialect)

    def to_text(self) -> str:
        lines = [f"#{i} {op.to_text()}" for i, op in enumerate(self.ai_ops)]
        lines += [c.to_text() for c in self.cores]
        return "\n".join(lines)


def read_tree(sql: str, dialect: str) -> exp.Expr:
    """Parse one statement with the dialect's sqlglot subclass (a leading comment is fine);
    nesting past `nesting.MAX_NESTING` is refused before the parser recurses into it."""
    reader = dialects.sqlglot_dialect(dialect)()
    try:
        tokens = reader.tokenize(sql)
    except TokenError as exc:
        raise SqlError(f"cannot parse the SQL: {_first_line(exc)}", sql.strip(), dialect) from None
    check_nesting(tokens, sql, dialect)
    try:
        trees = [t for t in reader.parser().parse(tokens, sql) if t]
    except (ParseError, TokenError) as exc:
        raise SqlError(f"cannot parse the SQL: {_first_line(exc)}", sql.strip(), dialect) from None
    except RecursionError:
        raise
    except Exception as exc:  # sqlglot's own builders fail on some malformed input
        log.debug("sqlglot failed on malformed SQL", exc_info=True)
        raise SqlError(f"cannot parse the SQL (sqlglot: {type(exc).__name__}: {_first_line(exc)})",
                       sql.strip(), dialect) from None
    if len(trees) != 1:
        raise SqlError(f"expected one SQL statement, got {len(trees)}", sql.strip(), dialect)
    return trees[0]


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def lower_sql(sql: str, dialect: str, *, runnable: bool = True
              ) -> tuple[Lowered, list[AiOp], list[Core]]:
    """`sql` lowered; `runnable=False` (transpile) also reads forms quail cannot run."""
    module = dialects.get(dialect)
    tree = read_tree(sql, module.NAME)
    # (a run names its AI columns as written; transpile keeps the user's projections as they are)
    unaliased = column_names.unaliased_projections(tree, dialects.sqlglot_dialect(module.NAME)) \
        if runnable else []
    lowered = lower(tree, module, runnable=runnable)
    column_names.name_ai_columns(unaliased)
    if runnable and module.NAME == "snowflake":  # (transpile keeps FLATTEN as written)
        lower_flatten(lowered.tree)
    if runnable and module.NAME == "databricks":  # (and from_json)
        lower_from_json(lowered.tree)
    if runnable and module.NAME == "bigquery":  # (and TO_JSON)
        lower_to_json(lowered.tree)
    if module.NAME in PATH_TEXT_DIALECTS:
        json_subscripts(lowered.tree, frozenset(i for i, b in enumerate(lowered.built)
                                                if b.op.output_type == "JSON"))
        _path_text_casts(lowered.tree)
    _aggregate_lists(lowered)
    cores, ops = extract_cores(lowered.tree, [b.op for b in lowered.built])
    return lowered, ops, cores


PATH_TEXT_DIALECTS = ("snowflake", "databricks")


def _path_text_casts(tree: exp.Expr) -> None:
    """`v:a::STRING` is the string at `a` in Snowflake and Databricks; sqlglot writes it as
    `CAST(v -> '$.a' AS TEXT)`, which in DuckDB keeps the JSON quotes (`"Bob"`). The text
    of a path is DuckDB's `->>`."""
    for cast in list(tree.find_all(exp.Cast)):
        inner = cast.this
        if isinstance(inner, exp.JSONExtract) and cast.to.this in TEXT_TYPES:
            cast.replace(exp.JSONExtractScalar(this=inner.this, expression=inner.expression))


def parse(sql: str, dialect: str, *, runnable: bool = True) -> ParsedQuery:
    """Read `sql` in `dialect` (snowflake, bigquery, databricks, duckdb); `runnable=False`
    also reads the forms quail cannot run (sql/runnable.py), for transpile."""
    name = dialects.get(dialect).NAME
    with nesting_guard(sql, name):
        lowered, ops, cores = lower_sql(sql, name, runnable=runnable)
        tvfs = tuple(i for i, b in enumerate(lowered.built) if b.extra.get("tvf"))
        return ParsedQuery(dialect=name, source_sql=sql, ai_ops=tuple(ops),
                           duckdb_sql=to_duckdb(lowered.tree), cores=tuple(cores),
                           table_functions=tvfs, tree=lowered.tree)


_VARCHAR = exp.DataType.build("VARCHAR")  # built once, not parsed again per argument


def runnable(tree: exp.Expr, group_ops: frozenset[int] = frozenset()) -> exp.Expression:
    """A copy of the lowered `tree` as DuckDB runs it: every `quail_ai_<id>(...)` argument cast
    to VARCHAR, so every binding type works and reaches the function as the same text the
    scans read; an aggregate's (`group_ops`) group list as a list of VARCHAR."""
    with deep_stack():  # the front end reads nesting up to its limit; so must this
        tree = tree.copy()
        for call in list(tree.find_all(exp.Anonymous)):
            op_id = placeholder_id(call.name)
            if op_id is not None:
                call.set("expressions", [_as_text(a, op_id in group_ops)
                                         for a in call.expressions])
        return tree


def statement_tree(duckdb_sql: str, group_ops: frozenset[int] = frozenset()) -> exp.Expression:
    """`runnable` of DuckDB SQL text: a query or a relation's scan built by hand, in tests (the
    front end's own keep their trees: `ParsedQuery.statement()`, `Relation.scan`)."""
    with deep_stack():
        try:
            tree = sqlglot.parse_one(duckdb_sql, read="duckdb")
        except (ParseError, TokenError) as exc:  # sqlglot wrote DuckDB SQL it cannot read back
            raise SqlError(f"the statement has no DuckDB form quail can run: {_first_line(exc)}",
                           duckdb_sql, "duckdb") from None
        return runnable(tree, group_ops)


def _as_text(arg: exp.Expression, group: bool) -> exp.Expression:
    """An AI call's argument as VARCHAR; an aggregate's group (`group`: `list(x ORDER BY ...)`,
    `list(DISTINCT x ORDER BY x)`: _aggregate_lists) as a list of VARCHAR, so it reaches the
    function as a list and not as one text."""
    agg = arg.this if group and isinstance(arg, exp.Window) else arg
    if group and isinstance(agg, exp.ArrayAgg):
        holder = agg.this if isinstance(agg.this, exp.Order) else agg
        inner = holder.this
        if isinstance(inner, exp.Distinct):
            inner.set("expressions", [exp.cast(e, _VARCHAR) for e in inner.expressions])
        else:
            holder.set("this", exp.cast(inner, _VARCHAR))
        return arg
    return exp.cast(arg, _VARCHAR)


def to_duckdb(tree: exp.Expr) -> str:
    """DuckDB SQL of a lowered tree; `quail_ai_<id>` keeps its lower-case spelling."""
    return tree.sql(dialect="duckdb", normalize_functions=False)


def _over(window: exp.Window, arg: exp.Expression) -> exp.Window:
    """`window` (its partition, order and frame) over `arg` instead of its own function."""
    out = window.copy()
    out.set("this", arg)
    return out


def _ordered_list(arg: exp.Expression, args: list[exp.Expression],
                  distinct: bool) -> exp.ArrayAgg:
    """`list(arg)` of an aggregate's group in an order of its values: the order DuckDB lists a
    group in otherwise depends on its threads (the machine's cores), and the prompt, so the
    answer, with it. Every list of a call is ordered by all of the call's arguments, so the
    lists stay aligned; a DISTINCT list by its own values (DuckDB orders it by nothing else)."""
    keys = [arg] if distinct else args
    inner = exp.Distinct(expressions=[arg]) if distinct else arg
    return exp.ArrayAgg(this=exp.Order(this=inner, expressions=[
        exp.Ordered(this=k.copy(), nulls_first=False) for k in keys]))


def _aggregate_lists(lowered: Lowered) -> None:
    """Aggregate ops read a whole group: their placeholder takes `list(<binding>)`."""
    for call in list(lowered.tree.find_all(exp.Anonymous)):
        op_id = op_id_of(call)
        if op_id is None or lowered.built[op_id].op.op not in AGGREGATE_OPS:
            continue
        is_distinct = ("distinct", "true") in lowered.built[op_id].op.task_args
        args = [_ordered_list(a, call.expressions, is_distinct) for a in call.expressions]
        window = call.parent if isinstance(call.parent, exp.Window) else None
        if not args and window is None:
            # every argument a constant (folded into the prompt): still an aggregate, one row
            # per group (NULL over no rows), not one answer per row; the group's copies of the
            # constant are asked about once
            wrapper = exp.AnyValue(this=exp.Null())
            call.replace(wrapper)
            wrapper.set("this", call)
            continue
        if window is not None:
            # AI_AGG(x) OVER (...): each row's group is `list(x) OVER (...)` (the window's own
            # partition and frame) and the call applies to it row by row
            args = [_over(window, a) for a in args]
            window.replace(call)
        call.set("expressions", args)
