"""Models configured as views with AI calls: built as tables (with a warning; see
test_ai_view_outside_dbt.py), so plain models, `dbt show` and AI models read them like any table,
also after the database is reopened."""

import pytest
from ai_view_project import AI_VIEW, REVIEWS
from dbt.adapters.duckdb.connections import DuckDBConnectionManager
from dbt.tests.util import run_dbt, run_dbt_and_capture

pytestmark = [pytest.mark.dbt, pytest.mark.model]


# Two bindings: DuckDB counts the registered function's parameters, one per binding.
_TWO_BINDING_VIEW = """
{{ config(materialized='view', quail_dialect='snowflake') }}
select id, AI_FILTER(PROMPT('Review number {1}: {0} Is this review positive?', review_text, id))
    as is_positive
from {{ ref('reviews') }}
"""

_PLAIN_TABLE_ON_VIEW = """
{{ config(materialized='table') }}
select id, upper(sentiment) as sentiment_upper from {{ ref('sentiment_view') }}
"""

_AI_TABLE_ON_VIEW = """
{{ config(materialized='table', quail_dialect='snowflake') }}
select id, AI_CLASSIFY(sentiment, ['good', 'bad']):labels[0]::string as verdict
from {{ ref('sentiment_view') }}
"""


class TestAiViews:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"reviews.csv": REVIEWS}

    @pytest.fixture(scope="class")
    def models(self):
        return {"sentiment_view.sql": AI_VIEW, "shouting.sql": _PLAIN_TABLE_ON_VIEW,
                "verdicts.sql": _AI_TABLE_ON_VIEW, "positive_view.sql": _TWO_BINDING_VIEW}

    def test_views_answer_when_read(self, project):
        run_dbt(["seed"])
        run_dbt(["run", "--select", "sentiment_view", "shouting"])
        rows = project.run_sql(
            f"select id, sentiment_upper from {project.test_schema}.shouting order by id",
            fetch="all")
        assert [r[0] for r in rows] == [1, 2, 3]
        assert {r[1] for r in rows} <= {"POSITIVE", "NEGATIVE"}

        DuckDBConnectionManager.close_all_connections()
        results = run_dbt(["show", "--select", "sentiment_view", "--limit", "3"])
        labels = {row["sentiment"] for row in results[0].agate_table.rows}
        assert labels <= {"positive", "negative"} and labels

    def test_view_with_two_bindings_answers_every_row(self, project):
        run_dbt(["seed"])
        run_dbt(["run", "--select", "positive_view"])
        rows = project.run_sql(
            f"select id, is_positive from {project.test_schema}.positive_view order by id",
            fetch="all")
        assert [r[0] for r in rows] == [1, 2, 3]
        assert all(isinstance(r[1], bool) for r in rows)

    def test_ai_model_over_ai_view_runs(self, project):
        run_dbt(["seed"])
        _, out = run_dbt_and_capture(["run", "--select", "sentiment_view", "verdicts"])
        assert "built as a table" in out
        rows = project.run_sql(f"select id, verdict from {project.test_schema}.verdicts",
                               fetch="all")
        assert len(rows) == 3
