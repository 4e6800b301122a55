"""Cores on a real DuckDB over examples/data: which AI predicates are planned, the pushed-down
scans (their columns and row counts), and that `duckdb_sql` computes the same answer as the
statement would with the AI function replaced by a plain SQL predicate.

The only fake is the model: `quail_ai_<id>` answers from the rendered prompt (a filter is TRUE
when the prompt says "great" or "love"), which `render_prompt` builds as the executor will.
"""

from pathlib import Path

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from quail_engine.sql import parse, render_prompt

DATA = Path(__file__).resolve().parents[3] / "examples" / "data"

CASES = [
    # (name, dialect, sql, cores as text, rows of each relation's scan)
    ('where_filter_pushdown', 'snowflake',
     "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Is {0} positive?', review)) AND product_id = 3",
     ['core(relations=[reviews[b_0_0]]; filters=[0]; joins=[]; projections=[])'],
     [[5]]),
    ('join_on_equi', 'snowflake',
     "SELECT r.id, p.name FROM reviews r JOIN products p ON r.product_id = p.product_id AND AI_FILTER(PROMPT('Does {0} fit {1}?', r.review, p.description)) WHERE p.product_id < 5",
     ['core(relations=[r[b_0_0, k_0], p[b_0_1, k_0]]; filters=[]; joins=[0]; projections=[])'],
     [[40, 4]]),
    ('comma_join', 'bigquery',
     "SELECT r.id FROM reviews r, products p WHERE r.product_id = p.product_id AND AI.IF(('Does ', r.review, ' fit ', p.name)) AND r.id > 30",
     ['core(relations=[r[b_0_0, k_0], p[b_0_1, k_0]]; filters=[]; joins=[0]; projections=[])'],
     [[10, 8]]),
    ('cross_join_no_equi', 'duckdb',
     "SELECT r.id, p.name FROM reviews r CROSS JOIN products p WHERE ai_filter('Does {0} fit {1}?', r.review, p.name) AND r.id <= 2",
     ['core(relations=[r[b_0_0], p[b_0_1]]; filters=[]; joins=[0]; projections=[])'],
     [[2, 8]]),
    ('or_is_unplanned', 'snowflake',
     'SELECT id FROM reviews WHERE AI_FILTER(review) OR id = 1',
     [],
     []),
    ('literal_argument_planned', 'snowflake',
     "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Is {0} about {1}?', review, 'price')) AND id < 30",
     ['core(relations=[reviews[b_0_0, b_0_1]]; filters=[0]; joins=[]; projections=[])'],
     [[29]]),
    ('not_is_planned_negated', 'duckdb',
     "SELECT id FROM reviews WHERE NOT ai_filter('Is {0} positive?', review)",
     ['core(relations=[reviews[b_0_0]]; filters=[0]; joins=[]; projections=[])'],
     [[40]]),
    # a WHERE call that is no conjunct of it, every row's: a projection of the core
    ('not_is_true_is_a_projection', 'duckdb',
     "SELECT id FROM reviews WHERE NOT (ai_filter('Is {0} positive?', review) IS TRUE)",
     ['core(relations=[reviews[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[40]]),
    ('order_by_planned', 'snowflake',
     "SELECT id FROM reviews WHERE id < 10 ORDER BY AI_FILTER(PROMPT('Is {0} positive?', review)), id",
     ['core(relations=[reviews[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[9]]),
    ('case_in_where_planned', 'snowflake',
     "SELECT id FROM reviews WHERE CASE WHEN id > 30 THEN AI_FILTER(PROMPT('Is {0} positive?', review)) ELSE id < 3 END",
     ['core(relations=[reviews[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[40]]),
    ('having_planned', 'snowflake',
     "SELECT review, COUNT(*) AS n FROM reviews GROUP BY review HAVING AI_FILTER(PROMPT('Is {0} positive?', review))",
     ['core(relations=[reviews[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[40]]),
    ('qualify_predicate_planned', 'snowflake',
     "SELECT id, product_id FROM reviews QUALIFY AI_FILTER(PROMPT('Is {0} positive?', review)) AND ROW_NUMBER() OVER (PARTITION BY product_id ORDER BY id) <= 2",
     ['core(relations=[reviews[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[40]]),
    # an argument naming a select-list alias: only DuckDB resolves it
    ('order_by_alias_argument_unplanned', 'snowflake',
     "SELECT id, review AS b FROM reviews WHERE id < 10 ORDER BY AI_FILTER(PROMPT('Is {0} positive?', b)), id",
     [],
     []),
    ('select_lateral_alias_argument_unplanned', 'snowflake',
     "SELECT id, review AS b, AI_FILTER(PROMPT('Is {0} positive?', b)) AS p FROM reviews WHERE id < 10",
     [],
     []),
    # a row clause's call over two relations: DuckDB asks only the pairs its joins form
    ('case_in_where_over_two_relations_unplanned', 'snowflake',
     "SELECT r.id FROM reviews r, products p WHERE r.product_id = p.product_id AND CASE WHEN r.id > 30 THEN AI_FILTER(PROMPT('Does {0} fit {1}?', r.review, p.name)) ELSE FALSE END",
     [],
     []),
    # an argument only DuckDB forms (a group's aggregate) is left to DuckDB, in any clause
    ('aggregate_argument_unplanned', 'snowflake',
     "SELECT product_id, AI_FILTER(PROMPT('Good? {0}', LISTAGG(review, ' '))) AS g FROM reviews GROUP BY product_id HAVING AI_FILTER(PROMPT('Is {0} great?', LISTAGG(review, ' ')))",
     [],
     []),
    ('left_join_on_unplanned', 'snowflake',
     "SELECT r.id, p.name FROM reviews r LEFT JOIN products p ON r.product_id = p.product_id AND AI_FILTER(PROMPT('Does {0} fit {1}?', r.review, p.name))",
     [],
     []),
    ('left_join_where_pushdown', 'duckdb',
     "SELECT r.id FROM reviews r LEFT JOIN products p ON r.product_id = p.product_id AND p.product_id > 2 WHERE ai_filter('Good? {0}', r.review) AND r.id < 10 AND p.name IS NULL",
     ['core(relations=[r[b_0_0], p[_row]]; filters=[0]; joins=[]; projections=[])'],
     [[9, 6]]),
    ('exists_semi', 'snowflake',
     "SELECT p.name FROM products p WHERE EXISTS (SELECT 1 FROM reviews r WHERE r.product_id = p.product_id AND r.id > 20 AND AI_FILTER(PROMPT('Does {0} praise {1}?', r.review, p.name)))",
     ['core(relations=[p[b_0_1, k_0], r[b_0_0, k_0]]; filters=[]; joins=[0]; projections=[])'],
     [[8, 20]]),
    ('not_exists_anti', 'databricks',
     "SELECT p.name FROM products p WHERE NOT EXISTS (SELECT 1 FROM reviews r WHERE r.product_id = p.product_id AND ai_classify(concat(r.review, ' / ', p.name), ARRAY('yes', 'no')) = 'yes')",
     ['core(relations=[p[b_0_1, k_0], r[b_0_0, k_0]]; filters=[]; joins=[0]; projections=[])'],
     [[8, 40]]),
    ('cte_and_group', 'snowflake',
     "WITH good AS (SELECT * FROM reviews WHERE id < 20) SELECT product_id, AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::STRING AS s, COUNT(*) AS n FROM good GROUP BY 1, 2 ORDER BY n DESC",
     ['core(relations=[good[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[19]]),
    ('subquery_in_from', 'duckdb',
     "SELECT x.id FROM (SELECT id, review FROM reviews WHERE product_id = 2) AS x WHERE ai_filter('Good? {0}', x.review)",
     ['core(relations=[x[b_0_0]]; filters=[0]; joins=[]; projections=[])'],
     [[5]]),
    ('qualify_window', 'snowflake',
     "SELECT id, product_id, AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::STRING AS s FROM reviews QUALIFY ROW_NUMBER() OVER (PARTITION BY product_id ORDER BY id) = 1",
     ['core(relations=[reviews[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[40]]),
    ('aggregate', 'snowflake',
     "SELECT product_id, AI_AGG(review, 'Summarize') AS s FROM reviews GROUP BY product_id ORDER BY product_id",
     ['core(relations=[reviews[b_0_0]]; filters=[]; joins=[]; projections=[]; aggregates=[0])'],
     [[40]]),
    ('tvf_generate_text', 'bigquery',
     'SELECT id, ml_generate_text_llm_result FROM ML.GENERATE_TEXT(MODEL `p.d.m`, (SELECT id, review AS prompt FROM reviews WHERE id <= 3), STRUCT(TRUE AS flatten_json_output)) ORDER BY id',
     ['core(relations=[__quail_in_0[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[3]]),
    ('tvf_generate_table', 'bigquery',
     "SELECT id, product, stars FROM AI.GENERATE_TABLE(MODEL `p.d.m`, (SELECT id, review AS prompt FROM reviews WHERE id <= 3), STRUCT('product STRING, stars INT64' AS output_schema)) ORDER BY id",
     ['core(relations=[__quail_in_0[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[3]]),
    ('tvf_ai_generate_text', 'bigquery',
     "SELECT id, result FROM AI.GENERATE_TEXT(MODEL `p.d.m`, (SELECT id, review AS prompt FROM reviews WHERE id > 38), STRUCT(30 AS max_output_tokens)) ORDER BY id",
     ['core(relations=[__quail_in_0[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[2]]),
    ('tvf_unflattened_json', 'bigquery',
     "SELECT id, ml_generate_text_result FROM ML.GENERATE_TEXT(MODEL `p.d.m`, (SELECT id, review AS prompt FROM reviews), STRUCT(0.2 AS temperature)) AS g ORDER BY id",
     ['core(relations=[__quail_in_0[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[40]]),
    ('bigquery_join_on_if', 'bigquery',
     "SELECT r.id, p.name FROM reviews AS r JOIN products AS p ON AI.IF(('Does ', r.review, ' fit ', p.name)) AND p.product_id = r.product_id WHERE r.id IN (1, 2, 3)",
     ['core(relations=[r[b_0_0, k_0], p[b_0_1, k_0]]; filters=[]; joins=[0]; projections=[])'],
     [[3, 8]]),
    ('is_true_is_planned', 'snowflake',
     "SELECT id FROM reviews WHERE AI_FILTER(review) = TRUE AND (AI_FILTER('x ' || review) IS TRUE)",
     ['core(relations=[reviews[b_0_0, b_1_0]]; filters=[0, 1]; joins=[]; projections=[])'],
     [[40]]),
    ('two_filters_and_projection', 'duckdb',
     "SELECT id, ai_generate('Reply to {0}', review) FROM reviews WHERE ai_filter('Negative? {0}', review) AND ai_filter('About {0}?', product_id) AND id < 15",
     ['core(relations=[reviews[b_1_0, b_2_0, b_0_0]]; filters=[1, 2]; joins=[]; projections=[0])'],
     [[14]]),
    # dbt's incremental idiom: an uncorrelated subquery conjunct is pushed into the scan, so only
    # new rows reach the model.
    ('incremental_subquery_pushdown', 'snowflake',
     "SELECT id, AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::STRING AS s FROM reviews WHERE id > (SELECT max(id) - 5 FROM reviews)",
     ['core(relations=[reviews[b_0_0]]; filters=[]; joins=[]; projections=[0])'],
     [[5]]),
    ('not_exists_correlated_with_own_alias_pushdown', 'duckdb',
     "SELECT r.id FROM reviews r WHERE ai_filter('Good? {0}', r.review) AND NOT EXISTS (SELECT 1 FROM reviews o WHERE o.id = r.id AND o.id <= 30)",
     ['core(relations=[r[b_0_0]]; filters=[0]; joins=[]; projections=[])'],
     [[10]]),
    ('subquery_correlated_with_other_side_not_pushed', 'snowflake',
     "SELECT r.id FROM reviews r JOIN products p ON r.product_id = p.product_id AND AI_FILTER(PROMPT('Does {0} fit {1}?', r.review, p.name)) WHERE r.id > (SELECT min(x.product_id) * 4 FROM products x WHERE x.product_id = p.product_id)",
     ['core(relations=[r[b_0_0, k_0], p[b_0_1, k_0]]; filters=[]; joins=[0]; projections=[])'],
     [[40, 8]]),
]

# The statement with every AI call replaced by the fake model's rule, in plain DuckDB SQL.
GOOD = "(lower({0}) LIKE '%great%' OR lower({0}) LIKE '%love%')"
ORACLES = {
    "where_filter_pushdown": "SELECT id FROM reviews WHERE " + GOOD.format("review")
                             + " AND product_id = 3",
    "join_on_equi": "SELECT r.id, p.name FROM reviews r JOIN products p ON r.product_id = "
                    "p.product_id AND " + GOOD.format("r.review || p.description")
                    + " WHERE p.product_id < 5",
    "or_is_unplanned": "SELECT id FROM reviews WHERE " + GOOD.format("review") + " OR id = 1",
    "not_is_planned_negated": "SELECT id FROM reviews WHERE NOT " + GOOD.format("review"),
    "not_is_true_is_a_projection": "SELECT id FROM reviews WHERE NOT " + GOOD.format("review"),
    "order_by_planned": "SELECT id FROM reviews WHERE id < 10 ORDER BY " + GOOD.format("review")
                        + ", id",
    "case_in_where_planned": "SELECT id FROM reviews WHERE CASE WHEN id > 30 THEN "
                             + GOOD.format("review") + " ELSE id < 3 END",
    "having_planned": "SELECT review, COUNT(*) AS n FROM reviews GROUP BY review HAVING "
                      + GOOD.format("review"),
    "qualify_predicate_planned": "SELECT id, product_id FROM reviews QUALIFY "
                                 + GOOD.format("review") + " AND ROW_NUMBER() OVER (PARTITION "
                                 "BY product_id ORDER BY id) <= 2",
    "left_join_on_unplanned": "SELECT r.id, p.name FROM reviews r LEFT JOIN products p ON "
                              "r.product_id = p.product_id AND "
                              + GOOD.format("r.review || p.name"),
    "exists_semi": "SELECT p.name FROM products p WHERE EXISTS (SELECT 1 FROM reviews r WHERE "
                   "r.product_id = p.product_id AND r.id > 20 AND "
                   + GOOD.format("r.review || p.name") + ")",
    "not_exists_anti": "SELECT p.name FROM products p WHERE NOT EXISTS (SELECT 1 FROM reviews r "
                       "WHERE r.product_id = p.product_id AND "
                       + GOOD.format("r.review || p.name") + ")",
    "tvf_ai_generate_text": "SELECT id, 'reply: ' || left(lower(review), 12) FROM reviews "
                            "WHERE id > 38 ORDER BY id",
    "bigquery_join_on_if": "SELECT r.id, p.name FROM reviews r JOIN products p ON "
                           + GOOD.format("r.review || p.name") + " AND p.product_id = "
                           "r.product_id WHERE r.id IN (1, 2, 3)",
    "cte_and_group": "SELECT product_id, CASE WHEN " + GOOD.format("review") + " THEN "
                     "'positive' ELSE 'negative' END AS s, COUNT(*) AS n FROM reviews WHERE id < 20"
                     " GROUP BY 1, 2 ORDER BY n DESC",
    "comma_join": "SELECT r.id FROM reviews r, products p WHERE r.product_id = p.product_id AND "
                  + GOOD.format("r.review || p.name") + " AND r.id > 30",
    "cross_join_no_equi": "SELECT r.id, p.name FROM reviews r CROSS JOIN products p WHERE "
                          + GOOD.format("r.review || p.name") + " AND r.id <= 2",
    "literal_argument_planned": "SELECT id FROM reviews WHERE "
                                + GOOD.format("review || 'price'") + " AND id < 30",
    "order_by_alias_argument_unplanned": "SELECT id, review AS b FROM reviews WHERE id < 10 "
                                         "ORDER BY " + GOOD.format("review") + ", id",
    "select_lateral_alias_argument_unplanned": "SELECT id, review AS b, " + GOOD.format("review")
                                               + " AS p FROM reviews WHERE id < 10",
    "case_in_where_over_two_relations_unplanned": "SELECT r.id FROM reviews r, products p WHERE "
                                                  "r.product_id = p.product_id AND CASE WHEN "
                                                  "r.id > 30 THEN "
                                                  + GOOD.format("r.review || p.name")
                                                  + " ELSE FALSE END",
    # the HAVING prompt ('Is {0} great?') says "great" itself: the fake passes every group
    "aggregate_argument_unplanned": "SELECT product_id, " + GOOD.format("string_agg(review, ' ')")
                                    + " AS g FROM reviews GROUP BY product_id",
    "left_join_where_pushdown": "SELECT r.id FROM reviews r LEFT JOIN products p ON "
                                "r.product_id = p.product_id AND p.product_id > 2 WHERE "
                                + GOOD.format("r.review") + " AND r.id < 10 AND p.name IS NULL",
    "subquery_in_from": "SELECT id FROM reviews WHERE product_id = 2 AND "
                        + GOOD.format("review"),
    "qualify_window": "SELECT id, product_id, CASE WHEN " + GOOD.format("review") + " THEN "
                      "'positive' ELSE 'negative' END AS s FROM reviews QUALIFY ROW_NUMBER() "
                      "OVER (PARTITION BY product_id ORDER BY id) = 1",
    "aggregate": "SELECT product_id, count(review) || ' reviews' AS s FROM reviews "
                 "GROUP BY product_id ORDER BY product_id",
    "tvf_generate_text": "SELECT id, 'reply: ' || left(lower(review), 12) FROM reviews "
                         "WHERE id <= 3 ORDER BY id",
    "tvf_generate_table": "SELECT id, 'thing' AS product, 4 AS stars FROM reviews WHERE id <= 3 "
                          "ORDER BY id",
    # without flatten_json_output the text comes in the vendor's response JSON
    "tvf_unflattened_json": "SELECT id, json_object('candidates', [json_object('content', "
                            "json_object('parts', [json_object('text', 'reply: ' || "
                            "left(lower(review), 12))]))])::VARCHAR FROM reviews ORDER BY id",
    "is_true_is_planned": "SELECT id FROM reviews WHERE " + GOOD.format("review") + " AND "
                          + GOOD.format("'x ' || review"),
    # 'About {0}?' over a product id is never "great": no row passes
    "two_filters_and_projection": "SELECT id, 'reply: ' || left(lower('Reply to ' || review), "
                                  "12) FROM reviews WHERE "
                                  + GOOD.format("'Negative? ' || review") + " AND "
                                  + GOOD.format("'About ' || product_id || '?'") + " AND id < 15",
    "incremental_subquery_pushdown": "SELECT id, CASE WHEN " + GOOD.format("review") + " THEN "
                                     "'positive' ELSE 'negative' END AS s FROM reviews WHERE "
                                     "id > (SELECT max(id) - 5 FROM reviews)",
    "not_exists_correlated_with_own_alias_pushdown": "SELECT r.id FROM reviews r WHERE "
                                                     + GOOD.format("r.review") + " AND NOT "
                                                     "EXISTS (SELECT 1 FROM reviews o WHERE "
                                                     "o.id = r.id AND o.id <= 30)",
    "subquery_correlated_with_other_side_not_pushed": "SELECT r.id FROM reviews r JOIN products "
                                                      "p ON r.product_id = p.product_id AND "
                                                      + GOOD.format("r.review || p.name")
                                                      + " WHERE r.id > (SELECT "
                                                      "min(x.product_id) * 4 FROM products x "
                                                      "WHERE x.product_id = p.product_id)",
}


def _fake(op):
    def answer(values):
        if op.op == "ai_aggregate":
            return f"{len(values[0])} reviews"
        text = render_prompt(op, [None if v is None else str(v) for v in values]).lower()
        good = "great" in text or "love" in text
        if op.output_type == "BOOLEAN":
            return good
        if op.op == "ai_classify":
            return op.labels[0 if good else 1].name
        if op.output_type == "JSON":
            return '{"product": "thing", "stars": 4}'
        return "reply: " + text[:12]
    names = [f"v{i}" for i in range(len(op.bindings))]
    scope = {"answer": answer}
    exec(f"def fn({', '.join(names)}): return answer([{', '.join(names)}])", scope)  # noqa: S102
    return scope["fn"]


def _as_executed(parsed) -> str:
    """Arguments reach the UDFs as VARCHAR, as the executor passes them."""
    tree = sqlglot.parse_one(parsed.duckdb_sql, read="duckdb")
    for call in tree.find_all(exp.Anonymous):
        if call.name.lower().startswith("quail_ai_"):
            call.set("expressions", [exp.cast(a, "VARCHAR[]" if isinstance(a, exp.ArrayAgg)
                                              else "VARCHAR") for a in call.expressions])
    return tree.sql(dialect="duckdb")


@pytest.fixture(scope="module")
def con():
    con = duckdb.connect()
    con.execute(f"CREATE TABLE reviews AS SELECT * FROM read_csv('{DATA / 'reviews.csv'}')")
    con.execute(f"CREATE TABLE products AS SELECT * FROM read_csv('{DATA / 'products.csv'}')")
    return con


def _register(con, parsed):
    for i, op in enumerate(parsed.ai_ops):
        name = f"quail_ai_{i}"
        try:
            con.remove_function(name)
        except Exception:  # noqa: BLE001 - not registered yet
            pass
        params = ["VARCHAR[]" if op.op == "ai_aggregate" else "VARCHAR"] * len(op.bindings)
        con.create_function(name, _fake(op), params, op.output_type, null_handling="special")


@pytest.mark.parametrize(("name", "dialect", "sql", "cores", "rows"), CASES,
                         ids=[c[0] for c in CASES])
def test_cores_and_scans(con, name, dialect, sql, cores, rows):
    parsed = parse(sql, dialect)
    assert [c.to_text() for c in parsed.cores] == cores
    for core, counts in zip(parsed.cores, rows, strict=True):
        for relation, count in zip(core.relations, counts, strict=True):
            result = con.execute(relation.scan_sql)
            assert tuple(d[0] for d in result.description) == relation.columns
            assert len(result.fetchall()) == count


@pytest.mark.parametrize(("name", "dialect", "sql", "cores", "rows"), CASES,
                         ids=[c[0] for c in CASES])
def test_duckdb_sql_runs(con, name, dialect, sql, cores, rows):
    parsed = parse(sql, dialect)
    _register(con, parsed)
    got = con.execute(_as_executed(parsed)).fetchall()
    # every case has its oracle: a case that only had to run would pass whatever rows it gave
    assert name in ORACLES, f"{name}: no oracle query"
    assert sorted(got, key=repr) == sorted(con.execute(ORACLES[name]).fetchall(), key=repr)


def test_join_keys_pair_both_scans():
    parsed = parse(CASES[1][2], "snowflake")
    (core,) = parsed.cores
    (key,) = core.keys
    assert (key.join, key.n, key.left, key.right) == (0, 0, "r", "p")
    assert [e.sql for e in parsed.ai_ops[0].join.equi] == ["r.product_id = p.product_id"]
    assert all("k_0" in r.columns for r in core.relations)


def test_placeholders_take_the_bindings_in_order():
    parsed = parse("SELECT AI_FILTER(PROMPT('{1} vs {0}', a, b)) FROM t", "snowflake")
    assert "quail_ai_0(b, a)" in parsed.duckdb_sql
    assert parsed.ai_ops[0].template == "{0} vs {1}"


def test_unstripped_vendor_shape_is_rebuilt(con):
    parsed = parse("SELECT AI_CLASSIFY(review, ['positive', 'negative']) AS o, "
                   "AI.x FROM (SELECT review, 1 AS x FROM reviews WHERE id = 1) AS AI",
                   "snowflake")
    _register(con, parsed)
    ((value, _),) = con.execute(_as_executed(parsed)).fetchall()
    assert value == '{"labels":["positive"]}'


def test_dbt_query_comment_is_kept():
    sql = '/* {"app": "dbt", "node_id": "model.x.y"} */\nSELECT AI_FILTER(review) FROM t'
    parsed = parse(sql, "snowflake")
    assert parsed.duckdb_sql.startswith('/* {"app": "dbt"')
    assert len(parsed.ai_ops) == 1


def test_same_call_in_select_and_group_by_is_one_op():
    parsed = parse("SELECT ai_analyze_sentiment(review), COUNT(*) FROM reviews "
                   "GROUP BY ai_analyze_sentiment(review)", "databricks")
    assert len(parsed.ai_ops) == 1
    assert parsed.duckdb_sql.count("quail_ai_0(review)") == 2


def test_same_call_in_two_blocks_stays_two_ops():
    parsed = parse("SELECT id FROM reviews WHERE AI_FILTER(review) UNION ALL "
                   "SELECT product_id FROM products WHERE AI_FILTER(review)", "snowflake")
    assert len(parsed.ai_ops) == 2
    assert [c.filters for c in parsed.cores] == [(0,), (1,)]


def test_lateral_sources_are_not_scanned_alone(con):
    parsed = parse("SELECT r.id, u.w FROM reviews r, UNNEST(string_split(r.review, ' ')) AS u(w) "
                   "WHERE ai_filter('Good? {0}', r.review) AND ai_filter('Noun? {0}', u.w) "
                   "AND r.id = 1", "duckdb")
    assert [c.to_text() for c in parsed.cores] == [
        "core(relations=[r[b_0_0]]; filters=[0]; joins=[]; projections=[])"]
    _register(con, parsed)
    assert con.execute(_as_executed(parsed)).fetchall() == [(1, "great.")]
