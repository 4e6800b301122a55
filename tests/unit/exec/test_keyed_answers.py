"""The final statement looks complete filters and joins up by DuckDB hash: same rows as by
text, and never when two values of a binding share a hash."""

import duckdb
import numpy as np
from exec_fakes import FakeEngine, ajoin, bfilter, filters_query, join_query, review_db

from quail_engine.exec import keyed_answers
from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

REVIEWS = [(1, "great price and good battery", 1), (2, "bad battery died fast", 1),
           (3, "the price was too high", 2), (4, None, 2), (5, "battery price price", 3)]
PRODUCTS = [(1, "widget"), (2, "gadget"), (3, "battery"), (4, None)]


def run(parsed, monkeypatch, keyed: bool):
    if not keyed:
        monkeypatch.setattr(keyed_answers, "slot_maps", lambda con, columns: None)
    s = QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine,
                     device_spec=DeviceSpec("toy", 1e11, 2e10))
    s.parse = lambda sql, dialect: parsed
    rows = s.execute(parsed.duckdb_sql).to_pylist()
    monkeypatch.undo()
    return rows, s


def test_join_rows_are_the_same_by_pass_table_by_hash_and_by_text(monkeypatch):
    """A complete join's ON condition becomes a membership test in its passing pairs' hashes
    (exec/pass_tables.py); where it cannot (here: forced off), the hash UDF answers it."""
    from quail_engine.exec import pass_tables

    parsed = join_query(ajoin())
    calls = []
    real = keyed_answers.keyed_answer

    def spy(*a):
        answer = real(*a)

        def wrapped(rows):
            calls.append(len(rows))
            return answer(rows)
        return wrapped

    monkeypatch.setattr(keyed_answers, "keyed_answer", spy)
    by_pass, session = run(parsed, monkeypatch, keyed=True)
    assert not calls  # joined through the table: no Python call per candidate pair
    monkeypatch.setattr(keyed_answers, "keyed_answer", spy)
    monkeypatch.setattr(pass_tables, "eligible", lambda op: False)
    by_hash, _ = run(parsed, monkeypatch, keyed=True)
    assert calls  # the statement looked the join up by hash
    by_text, _ = run(parsed, monkeypatch, keyed=False)
    assert by_pass == by_hash == by_text and by_pass


def test_filter_rows_and_nulls_are_the_same_by_hash_and_by_text(monkeypatch):
    parsed = filters_query((bfilter("Mentions PRICE?"), bfilter("Mentions BATTERY?")),
                           where=(0, 1), project=())
    by_hash, _ = run(parsed, monkeypatch, keyed=True)
    by_text, _ = run(parsed, monkeypatch, keyed=False)
    assert by_hash == by_text and by_hash


def test_keyed_statement_calls_the_hash_udf():
    from quail_engine.exec.udfs import emit, prepare
    from quail_engine.sql.query import statement_tree

    sql = emit(prepare(statement_tree("SELECT quail_ai_0(a, b), quail_ai_1(c) FROM t"), "_x",
                       frozenset({0})))
    assert sql == ("SELECT quail_ai_0_k_x(hash(CAST(a AS TEXT)), hash(CAST(b AS TEXT))), "
                   "quail_ai_1_x(CAST(c AS TEXT)) FROM t")


def test_a_hash_collision_falls_back_to_text():
    class Colliding:
        def from_arrow(self, table):
            class Rel:
                def project(self, _):
                    return self

                def fetchnumpy(self):
                    return {"h": np.zeros(table.num_rows, dtype=np.uint64)}
            return Rel()

    assert keyed_answers.slot_maps(Colliding(), [["a", "b"]]) is None
    maps = keyed_answers.slot_maps(duckdb.connect(), [["a", "b", "a"]])
    assert maps is not None and sorted(v for v in maps[0].values() if v) == ["a", "b"]
