"""A classification compared to string literals is a planned filter (`AiOp.pass_labels`), and a
CTE's classification that the outer query filters on is planned inside the outer core
(sql/label_ctes.py): which shapes are seen through, which are not, and that the view's scans
run on a real DuckDB over examples/data."""

from pathlib import Path

import duckdb
import pytest

from quail_engine.sql import parse
from quail_engine.sql.ir import AiOp, Label

DATA = Path(__file__).resolve().parents[3] / "examples" / "data"
SENTIMENT = "AI_CLASSIFY(r.review, ['positive', 'negative', 'mixed']):labels[0]::STRING"
TOPIC = "AI_CLASSIFY(c.review, ['price', 'quality']):labels[0]::STRING"


def cte(body_extra: str = "", outer_where: str = "c.sentiment IN ('negative', 'mixed')",
        select: str = "r.id, r.review") -> str:
    return (f"WITH c AS (SELECT {select}, {SENTIMENT} AS sentiment FROM reviews AS r"
            f"{body_extra}) SELECT c.id, c.sentiment, {TOPIC} AS topic FROM c "
            f"WHERE {outer_where}")


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    for name in ("reviews", "products"):
        c.execute(f"CREATE TABLE {name} AS SELECT * FROM read_csv_auto('{DATA / name}.csv')")
    yield c
    c.close()


def test_the_outer_core_reads_the_cte_source_and_filters_on_its_label(con):
    parsed = parse(cte(" WHERE r.id < 20"), "snowflake")
    outer, inner = parsed.cores
    assert outer.to_text() == ("core(relations=[c[b_1_0, b_0_0]]; filters=[1]; joins=[]; "
                               "projections=[0]; seen_through=[1])")
    assert inner.to_text() == "core(relations=[r[b_1_0]]; filters=[]; joins=[]; projections=[1])"
    (op_id, op), = outer.ops
    assert op_id == 1 and op.pass_labels == ("negative", "mixed")
    assert (op.bindings[0].alias, op.bindings[0].sql) == ("c", "c.review")
    statement_op = parsed.ai_ops[1]  # the statement's call is as written
    assert statement_op.pass_labels is None and statement_op.bindings[0].sql == "r.review"
    (relation,) = outer.relations
    assert "FROM reviews AS c WHERE c.id < 20" in relation.scan_sql
    rows = con.execute(relation.scan_sql).fetchall()
    assert len(rows) == con.execute("SELECT count(*) FROM reviews WHERE id < 20").fetchone()[0]
    assert all(a == b for a, b in rows)  # both questions read the same review


def test_a_subquery_and_a_join_are_seen_through_too(con):
    sql = (f"SELECT c.id, p.name FROM (SELECT r.id, r.review, {SENTIMENT} AS sentiment "
           "FROM reviews AS r) AS c JOIN products AS p ON AI_FILTER(PROMPT('Does {0} fit {1}?', "
           "c.review, p.name)) WHERE 'negative' = c.sentiment")
    parsed = parse(sql, "snowflake")
    outer = parsed.cores[0]
    classify = next(i for i, op in enumerate(parsed.ai_ops) if op.op == "ai_classify")
    join = next(i for i, op in enumerate(parsed.ai_ops) if op.op == "ai_join")
    assert outer.filters == (classify,) and outer.joins == (join,)
    assert [i for i, _ in outer.ops] == [classify]
    assert dict(outer.ops)[classify].pass_labels == ("negative",)
    for relation in outer.relations:
        con.execute(relation.scan_sql).fetchall()


@pytest.mark.parametrize(("where", "passing"), [
    ("c.sentiment = 'mixed'", ("mixed",)),
    ("c.sentiment <> 'mixed'", ("positive", "negative")),
    ("c.sentiment NOT IN ('mixed', 'positive')", ("negative",)),
    ("c.sentiment IN ('negative', 'mixed') AND c.sentiment <> 'mixed'", ("negative",)),
    ("c.sentiment = 'Mixed'", ()),  # SQL's `=` is exact: no label passes
])
def test_each_comparison_becomes_its_passing_labels(where, passing):
    outer = parse(cte(outer_where=where), "snowflake").cores[0]
    assert dict(outer.ops)[1].pass_labels == passing


@pytest.mark.parametrize("sql", [
    cte(" GROUP BY r.id, r.review"),
    cte(" LIMIT 10"),
    cte(select="DISTINCT r.id, r.review"),
    cte(select="r.id, UPPER(r.review) AS review"),  # the outer question reads a computed column
    cte(outer_where="c.sentiment = c.review"),  # not a literal
    cte(" WHERE AI_FILTER(PROMPT('Is {0} long?', r.review))"),  # an AI filter in the CTE
    cte(outer_where="c.sentiment = 'mixed' AND AI_FILTER(PROMPT('Is {0} long?', c.review))"),
    ("WITH c AS (SELECT r.id, r.review, " + SENTIMENT + " AS sentiment FROM reviews AS r) "
     "SELECT id, " + TOPIC.replace("c.review", "review") + " FROM c "
     "WHERE sentiment = 'mixed' AND AI_FILTER(PROMPT('Is {0} long?', review))"),
    cte() + " AND c.id IN (SELECT id FROM c)",  # the CTE read twice
    ("WITH c AS (SELECT r.id, r.review, " + SENTIMENT + " AS sentiment FROM reviews AS r) "
     "SELECT p.name, " + TOPIC + " FROM products AS p LEFT JOIN c ON c.id = p.product_id "
     "WHERE c.sentiment = 'mixed'"),  # an outer join's side
], ids=["group_by", "limit", "distinct", "computed_column", "column_not_literal", "ai_filter_in_cte",
        "outer_ai_filter", "outer_ai_filter_unqualified", "read_twice", "left_join"])
def test_shapes_that_are_not_seen_through_keep_their_cores(sql):
    parsed = parse(sql, "snowflake")
    assert not any(c.ops for c in parsed.cores)
    assert all(op.pass_labels is None for op in parsed.ai_ops)


def test_a_classification_compared_in_where_is_a_planned_filter():
    parsed = parse(f"SELECT r.id FROM reviews AS r WHERE {SENTIMENT} IN ('positive')",
                   "snowflake")
    (core,) = parsed.cores
    assert core.filters == (0,) and not core.ops
    assert parsed.ai_ops[0].pass_labels == ("positive",)


def test_pass_labels_decide_like_sql():
    op = AiOp("ai_classify", "{0}", labels=(Label("a"), Label("b"), Label("c")),
              pass_labels=("a", "c"))
    assert [op.passes(x) for x in ("a", "b", "c", None)] == [True, False, True, False]
    assert "pass_labels=[\"a\", \"c\"]" in op.to_text()


def test_explain_says_what_the_core_saw_through():
    from quail_engine.sql.explain import explain

    text = explain(cte(), "snowflake")
    assert "#1 seen through its CTE: reads c.review; rows pass with labels " \
           "['negative', 'mixed']" in text
    cores = explain(cte(), "snowflake", "json")["cores"]
    assert cores[0]["seen_through"] == [{"id": 1, "bindings": ["c.review"],
                                         "pass_labels": ["negative", "mixed"]}]
    assert cores[1]["seen_through"] == []


def test_explain_estimates_count_a_seen_through_operator_once(con):
    from quail_engine.exec.analyze import estimate_plans
    from quail_engine.plan.cost import DeviceSpec, ModelSpec

    spec = ModelSpec(name="t", num_layers=30, hidden_size=576, num_heads=9, num_kv_heads=3,
                     head_dim=64, intermediate_size=1536, vocab_size=49152)
    outer, inner = estimate_plans(con, parse(cte(), "snowflake"), spec,
                                  DeviceSpec("toy", 1e11, 2e10))
    assert [s.op for s in outer.steps if s.op is not None] == [1, 0]
    assert [s.op for s in inner.steps if s.op is not None] == []  # answered by the outer core
