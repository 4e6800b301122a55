"""create_ai_function: the one DuckDB function factory of the executor and the dbt adapter."""

import duckdb

from quail_engine.exec.udfs import create_ai_function
from quail_engine.sql.query import parse


def test_each_distinct_argument_tuple_is_asked_once_per_vector():
    op = parse("SELECT AI_COMPLETE('m', PROMPT('{0}/{1}', a, b)) FROM t", "snowflake").ai_ops[0]
    con, asked = duckdb.connect(), []

    def answer(rows):
        asked.append(sorted(rows))
        return ["/".join(r) for r in rows]

    create_ai_function(con, "quail_ai_test", op, answer)
    got = con.execute("SELECT quail_ai_test(a, b) FROM (VALUES ('x', '1'), ('y', '2'), "
                      "('x', '1'), ('x', '2')) AS v(a, b)").fetchall()
    assert [g for g, in got] == ["x/1", "y/2", "x/1", "x/2"]
    assert asked == [[("x", "1"), ("x", "2"), ("y", "2")]]
