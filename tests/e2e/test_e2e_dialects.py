"""Queries in all four dialects on the real default model (CPU): results equal the same
questions asked one prompt at a time with no planning, no KV sharing and no cache."""

import inspect
import itertools

import pyarrow as pa
import pytest

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.config import SessionConfig
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.prompts import OpPrompt
from quail_engine.exec.report import Report
from quail_engine.exec.session import QuailSession
from quail_engine.exec.udfs import emit, prepare, read_statement, sql_type
from quail_engine.sql.query import parse

pytestmark = pytest.mark.model

POS = "Is this review positive? "
PRICE = "Does this review talk about the price? "
ABOUT = ("Is the review ", " about a ", "?")
SUM = "Summarize in three words: "

QUERIES = {
    "snowflake": {
        "filter": f"SELECT id FROM reviews WHERE AI_FILTER(PROMPT('{POS}{{0}}', review)) ORDER BY id",
        "two_filters": f"SELECT id FROM reviews WHERE AI_FILTER(PROMPT('{POS}{{0}}', review)) "
                       f"AND AI_FILTER(PROMPT('{PRICE}{{0}}', review)) ORDER BY id",
        "join": "SELECT r.id, p.name FROM reviews r JOIN products p ON AI_FILTER(PROMPT("
                f"'{ABOUT[0]}{{0}}{ABOUT[1]}{{1}}{ABOUT[2]}', r.review, p.name)) ORDER BY r.id, p.name",
        "classify": "SELECT AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::STRING AS label, "
                    "COUNT(*) AS n FROM reviews GROUP BY label ORDER BY label",
        "generate": f"SELECT id, AI_COMPLETE('llama3.1-8b', PROMPT('{SUM}{{0}}', review)) AS s "
                    "FROM reviews WHERE id <= 2 ORDER BY id",
    },
    "bigquery": {
        "filter": f"SELECT id FROM reviews WHERE AI.IF(('{POS}', review)) ORDER BY id",
        "two_filters": f"SELECT id FROM reviews WHERE AI.IF(('{POS}', review)) "
                       f"AND AI.IF(('{PRICE}', review)) ORDER BY id",
        "join": f"SELECT r.id, p.name FROM reviews r JOIN products p ON AI.IF(('{ABOUT[0]}', "
                f"r.review, '{ABOUT[1]}', p.name, '{ABOUT[2]}')) ORDER BY r.id, p.name",
        "classify": "SELECT AI.CLASSIFY(review, ['positive', 'negative']) AS label, COUNT(*) AS n "
                    "FROM reviews GROUP BY label ORDER BY label",
        "generate": f"SELECT id, AI.GENERATE(('{SUM}', review)).result AS s FROM reviews "
                    "WHERE id <= 2 ORDER BY id",
    },
    "databricks": {
        "filter": f"SELECT id FROM reviews WHERE ai_query('ep', CONCAT('{POS}', review)) = 'yes' "
                  "ORDER BY id",
        "two_filters": f"SELECT id FROM reviews WHERE ai_query('ep', CONCAT('{POS}', review)) = "
                       f"'yes' AND ai_query('ep', CONCAT('{PRICE}', review)) = 'yes' ORDER BY id",
        "join": f"SELECT r.id, p.name FROM reviews r JOIN products p ON ai_query('ep', CONCAT("
                f"'{ABOUT[0]}', r.review, '{ABOUT[1]}', p.name, '{ABOUT[2]}')) = 'yes' "
                "ORDER BY r.id, p.name",
        "classify": "SELECT ai_classify(review, ARRAY('positive', 'negative')) AS label, "
                    "COUNT(*) AS n FROM reviews GROUP BY label ORDER BY label",
        "generate": f"SELECT id, ai_query('ep', CONCAT('{SUM}', review)) AS s FROM reviews "
                    "WHERE id <= 2 ORDER BY id",
    },
    "duckdb": {
        "filter": f"SELECT id FROM reviews WHERE ai_filter('{POS}' || review) ORDER BY id",
        "two_filters": f"SELECT id FROM reviews WHERE ai_filter('{POS}' || review) "
                       f"AND ai_filter('{PRICE}' || review) ORDER BY id",
        "join": f"SELECT r.id, p.name FROM reviews r JOIN products p ON ai_filter('{ABOUT[0]}' || "
                f"r.review || '{ABOUT[1]}' || p.name || '{ABOUT[2]}') ORDER BY r.id, p.name",
        "classify": "SELECT ai_classify(review, ['positive', 'negative']) AS label, COUNT(*) AS n "
                    "FROM reviews GROUP BY label ORDER BY label",
        "generate": f"SELECT id, ai_generate('{SUM}' || review) AS s FROM reviews WHERE id <= 2 "
                    "ORDER BY id",
    },
}
CASES = [(d, k) for d in QUERIES for k in QUERIES[d]]
_COUNTER = itertools.count()


class Reference:
    """Every AI call of the query answered alone: one prompt per engine call, full tokens."""

    def __init__(self, engine):
        self.runner = OpRunner(engine, AnswerCache(None), Report(), batch_size=1)
        self.runner.share_kv = False
        self.memo: dict = {}

    def answer(self, op, values):
        layout = OpPrompt.for_op(op)
        key = (layout.texts(values), op.op, tuple(lb.name for lb in op.labels or ()))
        if key not in self.memo:
            self.memo[key] = self.runner.answer(0, layout, [values])[0]
        return self.memo[key]


@pytest.fixture(scope="module")
def reference(engine):
    return Reference(engine)


def expected_rows(con, parsed, reference):
    """Run the statement with UDFs that ask the reference for every row DuckDB evaluates."""
    types = {"BOOLEAN": pa.bool_(), "VARCHAR": pa.string(), "DOUBLE": pa.float64()}
    ref_con = con.cursor()
    suffix = f"_ref{next(_COUNTER)}"
    for i, op in enumerate(parsed.ai_ops):
        def fn(*arrays, op=op, i=i):
            rows = zip(*(a.to_pylist() for a in arrays))
            return pa.array([reference.answer(op, r) for r in rows],
                            type=types[sql_type(op)])
        fn.__signature__ = inspect.Signature([inspect.Parameter(
            f"b{k}", inspect.Parameter.POSITIONAL_ONLY) for k in range(len(op.bindings))])
        ref_con.create_function(f"quail_ai_{i}{suffix}", fn, ["VARCHAR"] * len(op.bindings),
                                sql_type(op), type="arrow")
    return ref_con.sql(emit(prepare(read_statement(parsed), suffix))).fetchall()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("answers")


@pytest.mark.parametrize("dialect,kind", CASES)
def test_query_matches_one_question_at_a_time(con, engine, reference, cache_dir, dialect, kind):
    sql = QUERIES[dialect][kind]
    session = QuailSession(con.cursor(), lambda: engine,
                           SessionConfig(cache_dir=cache_dir, device="cpu"))
    got = [tuple(r.values()) for r in session.execute(sql, dialect).to_pylist()]
    parsed = parse(sql, dialect)
    assert got == expected_rows(con, parsed, reference)  # the reference knows no plan
    if kind in ("filter", "two_filters", "join", "classify"):
        assert got, f"{dialect} {kind}: empty result"
    assert session.report.truncated == 0
    assert_report_invariants(session.report)


def assert_report_invariants(report):
    """What any report must satisfy: fresh <= requested tokens, rows out <= rows in for
    filters and joins, totals are the operators' sums, the speed of light is under the wall
    time (it is a lower bound on every device), and so are the model load and the phases."""
    for o in report.ops.values():
        assert o.fresh_tokens <= o.requested_tokens, o
        if o.kind in ("ai_filter", "ai_join"):
            assert o.rows_out <= o.rows_in, o
    assert report.fresh_tokens == sum(o.fresh_tokens for o in report.ops.values())
    assert report.cache_hits == sum(o.cache_hits for o in report.ops.values())
    if report.sol_seconds:
        assert report.sol_seconds <= report.wall_s
    # the model load is part of the wall time, counted once; the phases do not overlap
    assert 0 <= report.load_s <= report.wall_s, (report.load_s, report.wall_s)
    assert sum(report.phases.values()) <= report.wall_s * 1.001 + 1e-3, report.phases
