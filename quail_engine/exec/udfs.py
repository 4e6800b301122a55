"""The query's AI functions inside DuckDB: `quail_ai_<id>(b0, b1, ...)` as Arrow scalar UDFs.

Each UDF looks its answers up in the AnswerStore. A miss of an operator the plan precomputed
completely (a core's filter or join) is a row another conjunct already eliminated: it answers
FALSE (NULL under `NOT`) and no prompt runs. Any other miss is computed on the fly in one batch per DuckDB vector
(counted as "unplanned" in the report). Arguments are passed as VARCHAR (the front end's
`query.runnable` casts them), so every binding type works and matches the scans' text.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from quail_engine.exec import keyed_answers
from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.call_gather import GatheredCalls
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.pass_tables import hashed, is_plain_conjunct, membership, pass_through
from quail_engine.exec.tasks import details_object, is_structured, masked
from quail_engine.sql.ir import PREDICATE_KINDS, placeholder_name
from quail_engine.sql.nesting import deep_stack
from quail_engine.sql.op_kinds import spec
from quail_engine.sql.placeholder import placeholder_id
from quail_engine.sql.query import runnable, statement_tree
from quail_engine.sql.shapes import shows_details

log = logging.getLogger(__name__)
# (rows, their answers) -> (model name, (prompt tokens, answer tokens)) for each row
Usage = Callable[[list[tuple], Sequence[object]], list[tuple[str, tuple[int, int] | None]]]
_ARROW = {"BOOLEAN": pa.bool_(), "DOUBLE": pa.float64(), "FLOAT": pa.float64(),
          "VARCHAR": pa.string(), "JSON": pa.json_(), "VARCHAR[]": pa.list_(pa.string()),
          "BIGINT": pa.int64(), "INTEGER": pa.int64()}


def sql_type(op) -> str:
    t = (op.output_type or "VARCHAR").upper()
    return t if t in _ARROW else "VARCHAR"


def read_statement(parsed) -> exp.Expression:
    """A copy of the statement's tree as the front end builds it (ParsedQuery.statement():
    AI call arguments already cast to VARCHAR); the statement DuckDB runs (`prepare`,
    `limit_pushdown.push_limit`) and its keyed variant are derived from it. A query built by
    hand (tests) without that method gets it from its text, by the same front-end function."""
    statement = getattr(parsed, "statement", None)
    tree = statement() if callable(statement) else statement_tree(
        parsed.duckdb_sql, getattr(parsed, "group_ops", frozenset()))
    return tree.copy()


def prepare(tree: exp.Expression, suffix: str = "",
            keyed: frozenset[int] = frozenset(),
            passes: dict[int, str] | None = None) -> exp.Expression:
    """A copy of `tree` with every quail_ai_<id>(...) call renamed to quail_ai_<id><suffix>.
    DuckDB functions live in the database's catalog, shared by every cursor: a per-execution
    suffix keeps concurrent statements from clashing. Operators in `keyed`
    (exec/keyed_answers.py) call quail_ai_<id>_k<suffix> on their arguments' hashes; those in
    `passes` (op id -> its table, exec/pass_tables.py) join through their passing pairs' hashes
    where the call is a plain conjunct of an inner JOIN ON or WHERE (`pass_through`), and
    are a membership test of them where it is one of an outer join's ON."""
    passes = passes or {}
    with deep_stack():
        tree = tree.copy()
        for call in list(tree.find_all(exp.Anonymous)):
            op_id = placeholder_id(call.name)
            if op_id is None:
                continue
            if op_id in keyed:
                if op_id in passes and is_plain_conjunct(call):
                    args = [hashed(a) for a in call.expressions]
                    if not pass_through(call, args, passes[op_id]):
                        call.replace(membership(args, passes[op_id]))
                    continue
                call.set("this", f"{call.name.lower()}_k{suffix}")
                call.set("expressions", [exp.Anonymous(this="hash", expressions=[a])
                                         for a in call.expressions])
            else:
                call.set("this", f"{call.name.lower()}{suffix}")
        return tree


def emit(tree: exp.Expression) -> str:
    """The DuckDB SQL of a statement tree (`quail_ai_<id>` keeps its lower-case spelling)."""
    with deep_stack():
        return tree.sql(dialect="duckdb", normalize_functions=False)


def prepare_scan(relation, suffix: str = "", group_ops: frozenset[int] = frozenset()) -> str:
    """The DuckDB SQL of a relation's scan that calls AI functions itself (a CTE's or a
    subquery's AI projection), `prepare`d to this statement's function names: from its tree
    (`Relation.scan`), the calls' arguments cast as in the statement (`runnable`). A relation
    built by hand (tests) has only its text, read by the front end's `statement_tree`."""
    tree = (runnable(relation.scan, group_ops) if relation.scan is not None
            else statement_tree(relation.scan_sql, group_ops))
    return emit(prepare(tree, suffix))


def ai_function(op, answer: Callable[[list[tuple]], Sequence[object]]) -> Callable:
    """`op` as a DuckDB Arrow function: each vector's distinct argument tuples are answered by
    one `answer(rows)` call (an answer per tuple) and spread back over the vector's rows."""
    arrow_type = _ARROW[sql_type(op)]

    def answered(arrays):
        rows, inverse = _distinct_rows(arrays)
        answers = pa.array(answer(rows), type=arrow_type)
        return answers if inverse is None else answers.take(inverse)

    def fn(*arrays):
        """A row with a NULL argument is NULL and asks nothing (registered with special NULL
        handling, because an answer itself may be NULL: a structured answer the model did
        not complete)."""
        if not any(a.null_count for a in arrays):
            return answered(arrays)
        valid = functools.reduce(pc.and_, [pc.is_valid(a) for a in arrays])
        kept = answered([a.filter(valid) for a in arrays])
        slots = np.cumsum(valid.to_numpy(zero_copy_only=False)) - 1
        return kept.take(pa.array(slots, mask=~valid.to_numpy(zero_copy_only=False)))

    # duckdb counts the function's parameters: give it one per binding
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(f"b{i}", inspect.Parameter.POSITIONAL_ONLY)
         for i in range(len(op.bindings))])
    return fn


def create_ai_function(con, name: str, op,
                       answer: Callable[[list[tuple]], Sequence[object]],
                       usage: Usage | None = None) -> str:
    """Register `ai_function(op, answer)` on `con` as `name`, one VARCHAR parameter per binding
    (`prepare` casts the arguments); returns `name`. The one factory of the executor's
    statements and of the dbt adapter's view functions. A show_details call answers the
    vendor's object around the text: created now (the statement's time), model and usage
    from `usage` (null without it)."""
    if shows_details(op):
        answer = _with_details(answer, usage, int(time.time()), is_structured(op))
    if op.task == "mask":
        answer = _with_masks(op, answer)
    # an aggregate's bindings are its group's values, list(...) of the cast texts: a list
    # reaches it as a list (DuckDB would cast it to one text, '[a, b]', quotes and all)
    kind = "VARCHAR[]" if spec(op.op).is_aggregate else "VARCHAR"
    con.create_function(name, ai_function(op, answer), [kind] * len(op.bindings),
                        sql_type(op), type="arrow", side_effects=False, null_handling="special")
    return name


def register_udfs(con, ai_ops, store: AnswerStore, runner: OpRunner,
                  lock: threading.Lock | None = None, suffix: str = "") -> list[str]:
    """Register `quail_ai_<id><suffix>` for every operator of the query on `con`; returns the
    names (pass them to `unregister_udfs` when the statement is done)."""
    lock = lock or threading.Lock()
    return [create_ai_function(con, placeholder_name(op_id) + suffix, op,
                               _stored_answers(op_id, op, store, runner, lock),
                               _usage(op, runner, lock))
            for op_id, op in enumerate(ai_ops)]


def _with_details(answer: Callable[[list[tuple]], Sequence[object]], usage: Usage | None,
                  created: int, structured: bool) -> Callable[[list[tuple]], list[object]]:
    def detailed(rows: list[tuple]) -> list[object]:
        texts = answer(rows)
        facts = usage(rows, texts) if usage is not None else [(None, None)] * len(rows)
        return [details_object(t, created, model, tokens, structured)
                for t, (model, tokens) in zip(texts, facts)]
    return detailed


def _with_masks(op, answer: Callable[[list[tuple]], Sequence[object]]
                ) -> Callable[[list[tuple]], list[object]]:
    """A mask's rows answered as their text with the mentions the model found masked."""
    def masking(rows: list[tuple]) -> list[object]:
        return [masked(op, row, found) for row, found in zip(rows, answer(rows))]
    return masking


def _usage(op, runner: OpRunner, lock: threading.Lock) -> Usage:
    """Token counts of each row's prompt as the model that wrote its answer reads it (chat
    template, task wording) and of the answer's text, by that model's tokenizer, and the
    model's name."""
    def usage(rows: list[tuple], texts: Sequence[object]) -> list:
        writer = runner.writer_of(op)
        layout = writer.layout(op)
        asked = [(r, t) for r, t in zip(rows, texts) if t is not None]
        with lock:
            parts = [layout.texts(r) for r, _ in asked]
            heads = writer.text.heads([p for p, _ in parts])
            tails = writer.text.tails([q for _, q in parts])
            answers = writer.text.tokenize([str(t) for _, t in asked])
        counts = iter(zip(heads, tails, answers))
        model, out = writer.text.model_name, []
        for t in texts:
            h, q, a = next(counts) if t is not None else ((), (), ())
            out.append((model, None if t is None else (len(h) + len(q), len(a))))
        return out
    return usage


def register_keyed_udfs(con, ai_ops, store: AnswerStore, maps: dict, report,
                        suffix: str = "") -> list[str]:
    """`quail_ai_<id>_k<suffix>` over the hashes of the bindings, for each op in `maps`
    (op id -> keyed_answers.slot_maps); returns the names."""
    names = []
    for op_id, slot in maps.items():
        name = f"{placeholder_name(op_id)}_k{suffix}"
        op = ai_ops[op_id]
        answer = keyed_answers.keyed_answer(op_id, op, store, slot, report)
        con.create_function(name, ai_function(op, answer), ["UBIGINT"] * len(slot), "BOOLEAN",
                            type="arrow", side_effects=False, null_handling="special")
        names.append(name)
    return names


def unregister_udfs(con, names) -> None:
    for name in names:
        try:
            con.remove_function(name)
        except Exception:  # noqa: BLE001 - already gone or registered elsewhere
            log.debug("could not remove function %s", name)


def _stored_answers(op_id: int, op, store: AnswerStore, runner: OpRunner,
                    lock: threading.Lock) -> Callable[[list[tuple]], list[object]]:
    guarded = op.op in PREDICATE_KINDS

    def asked(missing: list[tuple]) -> list[object]:  # (under the lock)
        answers = runner.answer(op_id, runner.layout(op), missing, unplanned=True)
        rep = runner.report.op(op_id, op.op)  # rows the statement asked DuckDB's way
        rep.rows_in += len(missing)
        rep.rows_out += sum(map(op.passes, answers)) if guarded else len(missing)
        return answers

    ask = GatheredCalls(asked, lock).answer  # (DuckDB's threads call at once: call_gather.py)

    def skip(missing: list[tuple]) -> list[object]:
        store.skipped[op_id] = store.skipped.get(op_id, 0) + len(missing)
        runner.report.op(op_id, op.op).skipped += len(missing)
        return [op.unasked_answer] * len(missing)

    def answer(rows: list[tuple]) -> list[object]:
        store.fill(op_id, rows, skip if guarded and op_id in store.complete else ask)
        return [store.get(op_id, r) for r in rows]

    return answer


def _distinct_rows(arrays) -> tuple[list[tuple], pa.Array | None]:
    """The distinct argument tuples of a DuckDB vector and, for each row, the index of its
    tuple (None: the rows are the tuples, in order). Values become Python objects once per
    distinct value, not once per row: a join's vector repeats one 4,000-token anchor text
    across its pairs."""
    if not arrays:
        return [()], None
    if len(arrays[0]) == 0:
        return [], None
    if any(pa.types.is_list(a.type) for a in arrays):  # an aggregate's groups, one row each
        return [tuple(tuple(v) if isinstance(v, list) else v for v in row)
                for row in zip(*(a.to_pylist() for a in arrays))], None
    uniques = [pc.unique(a) for a in arrays]
    if all(len(u) == len(a) for u, a in zip(uniques, arrays)) and len(arrays) == 1:
        return [(v,) for v in arrays[0].to_pylist()], None
    codes = np.stack([pc.index_in(a, value_set=u).to_numpy(zero_copy_only=False)
                      for a, u in zip(arrays, uniques)], axis=1)
    combos, inverse = np.unique(codes, axis=0, return_inverse=True)
    values = [u.to_pylist() for u in uniques]
    rows = [tuple(values[k][c] for k, c in enumerate(combo)) for combo in combos.tolist()]
    return rows, pa.array(inverse.reshape(-1))
