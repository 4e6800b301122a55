"""An AI aggregate's group reaches its function in an order of its values, not in the order
DuckDB's threads listed it: the prompt, and so the answer, must not depend on the machine's
cores."""

import hashlib

import duckdb
import pytest

from quail_engine.sql.query import parse

ROWS = 400_000
GROUPS = 20


def _group_digests(sql: str, dialect: str, threads: int) -> list[tuple]:
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    # rows of each group spread through the table, so parallel scans interleave them
    con.execute(f"CREATE TABLE reviews AS SELECT i AS id, (i * 7919) % {GROUPS} AS product_id, "
                f"'review ' || ((i * 104729) % {ROWS}) AS review FROM range({ROWS}) r(i)")
    con.create_function("quail_ai_0", lambda texts: hashlib.sha256(
        "\x1f".join(texts).encode()).hexdigest(), ["VARCHAR[]"], "VARCHAR")
    statement = parse(sql, dialect).statement().sql("duckdb")
    return con.execute(f"SELECT * FROM ({statement}) ORDER BY ALL").fetchall()


@pytest.mark.parametrize("sql,dialect", [
    ("SELECT product_id, AI_AGG(review, 'Summarize') AS s FROM reviews GROUP BY product_id",
     "snowflake"),
    ("SELECT product_id, AI.AGG(review, 'Summarize') AS s FROM reviews GROUP BY product_id",
     "bigquery"),
])
def test_a_groups_texts_reach_the_function_alike_on_one_thread_and_on_eight(sql, dialect):
    one = _group_digests(sql, dialect, 1)
    assert len(one) == GROUPS
    assert _group_digests(sql, dialect, 8) == one


def test_a_windowed_groups_list_and_a_distinct_one_are_ordered_too():
    for sql, listed in (
            ("SELECT AI_AGG(review, 'Summarize') OVER (PARTITION BY product_id) AS s FROM reviews",
             "ARRAY_AGG(CAST(review AS TEXT) ORDER BY review) OVER (PARTITION BY product_id)"),
            ("SELECT AI.AGG(DISTINCT review, 'Summarize') AS s FROM reviews",
             "ARRAY_AGG(DISTINCT CAST(review AS TEXT) ORDER BY review)")):
        dialect = "bigquery" if "AI.AGG" in sql else "snowflake"
        assert listed in parse(sql, dialect).statement().sql("duckdb"), sql
