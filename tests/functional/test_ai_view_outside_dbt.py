"""A model configured as a view that calls AI functions is built as a table, with a warning: a
DuckDB view is evaluated when read, and the AI functions exist only inside a dbt-quail process,
so the database's other readers (duckdb CLI, Python, BI tools) could not read it."""

import duckdb
import pytest
from ai_view_project import AI_VIEW, REVIEWS
from dbt_subprocess import run, write_project

pytestmark = [pytest.mark.dbt, pytest.mark.model]


_PLAIN_VIEW = """
{{ config(materialized='view') }}
select id, upper(sentiment) as shouted from {{ ref('sentiment_view') }}
"""

_AI_TABLE_ON_IT = """
{{ config(materialized='table', quail_dialect='snowflake') }}
select id, AI_FILTER(PROMPT('Is this sentiment positive? {0}', sentiment)) as is_positive
from {{ ref('sentiment_view') }}
"""


def test_ai_view_is_a_table_any_duckdb_reader_can_read(tmp_path):
    root = write_project(tmp_path, {"seeds/reviews.csv": REVIEWS,
                                    "models/sentiment_view.sql": AI_VIEW,
                                    "models/shouting.sql": _PLAIN_VIEW,
                                    "models/positive.sql": _AI_TABLE_ON_IT})
    run(root, "seed")
    out = run(root, "run").stdout
    assert "model.quail_test.sentiment_view calls AI functions" in out
    assert "materialized='table'" in out

    con = duckdb.connect(str(root / "db.duckdb"), read_only=True)  # plain DuckDB, no quail
    kinds = dict(con.execute("select table_name, table_type from information_schema.tables "
                             "where table_schema = 'main'").fetchall())
    assert kinds["sentiment_view"] == "BASE TABLE" and kinds["shouting"] == "VIEW"
    rows = con.execute("select id, sentiment from sentiment_view order by id").fetchall()
    assert [r[0] for r in rows] == [1, 2, 3]
    assert {r[1] for r in rows} <= {"positive", "negative"}
    assert len(con.execute("select * from shouting").fetchall()) == 3
    assert len(con.execute("select * from positive").fetchall()) == 3
    con.close()

    again = run(root, "run", "--select", "sentiment_view").stdout  # a table replaces a table
    assert "Completed successfully" in again
