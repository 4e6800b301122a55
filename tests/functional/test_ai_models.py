"""AI models on the embedded default model (CPU): the same classification written in Snowflake,
BigQuery and Databricks syntax gives the same labels; incremental AI models compute answers only
for new rows, with each incremental strategy; views, `dbt show` and unit tests see AI results."""

import re

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

pytestmark = [pytest.mark.dbt, pytest.mark.model]

_REVIEWS = """id,review_text
1,I love this blender. It works perfectly and makes great smoothies.
2,Terrible kettle. It broke after two days and leaks water everywhere.
3,Fantastic headphones with amazing sound. Best purchase this year.
4,The toaster burns every slice. Awful and a complete waste of money.
5,Wonderful lamp. Bright and beautiful and I am very happy with it.
6,Horrible fan. It is loud and stopped working within a week.
7,These shoes are so comfortable. I love them and wear them daily.
8,The charger is junk. It never charged my phone. I want a refund.
"""

_SENTIMENT = {
    "snowflake": "AI_CLASSIFY(review_text, ['positive', 'negative']):labels[0]::string",
    "bigquery": "AI.CLASSIFY(review_text, categories => ['positive', 'negative'])",
    "databricks": "ai_classify(review_text, ARRAY('positive', 'negative'))",
}


def _sentiment_model(dialect: str, materialized: str = "table", strategy: str | None = None) -> str:
    config = f"materialized='{materialized}', quail_dialect='{dialect}'"
    if strategy:
        config += f", incremental_strategy='{strategy}'"
        if strategy != "append":
            config += ", unique_key='id'"
    return f"""
{{{{ config({config}) }}}}
select id, {_SENTIMENT[dialect]} as sentiment
from {{{{ ref('reviews') }}}}
where id <= {{{{ var('max_id', 1000) }}}}
{{% if is_incremental() %}}
  and id > (select coalesce(max(id), 0) from {{{{ this }}}})
{{% endif %}}
"""


def _labels(project, model: str) -> dict[int, str]:
    rows = project.run_sql(f"select id, sentiment from {project.test_schema}.{model}", fetch="all")
    return dict(rows)


class TestSameLabelsInEveryDialect:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"reviews.csv": _REVIEWS}

    @pytest.fixture(scope="class")
    def models(self):
        return {f"{d}_sentiment.sql": _sentiment_model(d) for d in _SENTIMENT}

    def test_three_dialects_one_answer(self, project):
        run_dbt(["seed"])
        run_dbt(["run"])
        labels = {d: _labels(project, f"{d}_sentiment") for d in _SENTIMENT}
        assert set(labels["snowflake"]) == set(range(1, 9))
        assert set(labels["snowflake"].values()) <= {"positive", "negative"}
        assert labels["bigquery"] == labels["snowflake"]
        assert labels["databricks"] == labels["snowflake"]


_STRATEGIES = ["append", "delete+insert", "merge"]


class TestIncrementalComputesOnlyNewRows:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"reviews.csv": _REVIEWS}

    @pytest.fixture(scope="class")
    def models(self):
        # distinct labels per model: the answer cache is shared, and each model must show its own
        # prompts
        return {f"inc_{s.replace('+', '_')}.sql": _sentiment_model(
            "snowflake", "incremental", s).replace("'negative'", f"'negative {i}'")
            for i, s in enumerate(_STRATEGIES)}

    def test_second_run_asks_only_about_new_rows(self, project):
        run_dbt(["seed"])
        _, first = run_dbt_and_capture(["run", "--threads", "1", "--vars", "{max_id: 5}"])
        _, second = run_dbt_and_capture(["run", "--threads", "1", "--vars", "{max_id: 8}"])
        for strategy in _STRATEGIES:
            model = f"inc_{strategy.replace('+', '_')}"
            assert _ai_work(first, model) == (5, 5)
            assert _ai_work(second, model) == (3, 3)
            # the incremental filter is pushed into the scan: old rows never reach the model, not
            # even as answer-cache hits
            assert _cache_hits(second, model) == 0
            assert sorted(_labels(project, model)) == list(range(1, 9))


def _ai_work(log: str, model: str) -> tuple[int, int]:
    """(rows out, prompts run) from the adapter's report line of `model`."""
    found = re.findall(rf"model\.test\.{model}: (\d+) rows, (\d+) prompts run", log)
    assert len(found) == 1, f"no AI report line for {model} in:\n{log}"
    return int(found[0][0]), int(found[0][1])


def _cache_hits(log: str, model: str) -> int:
    found = re.findall(rf"model\.test\.{model}: \d+ rows, \d+ prompts run, (\d+) answers from",
                       log)
    assert len(found) == 1, f"no AI report line for {model} in:\n{log}"
    return int(found[0])


_UNIT_TEST_YML = """
unit_tests:
  - name: sentiment_on_fixture_rows
    model: snowflake_sentiment
    given:
      - input: ref('reviews')
        rows:
          - {id: 101, review_text: "Great toaster, I love it."}
          - {id: 102, review_text: "Broken on arrival, awful."}
    expect:
      rows:
        - {id: 101, is_label: true}
        - {id: 102, is_label: true}
"""

_LABELLED_MODEL = """
{{ config(materialized='table', quail_dialect='snowflake') }}
select id, sentiment, sentiment in ('positive', 'negative') as is_label
from (
    select id, AI_CLASSIFY(review_text, ['positive', 'negative']):labels[0]::string as sentiment
    from {{ ref('reviews') }}
) as classified
"""


class TestShowAndUnitTestsRunAi:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"reviews.csv": _REVIEWS}

    @pytest.fixture(scope="class")
    def models(self):
        return {"snowflake_sentiment.sql": _LABELLED_MODEL, "unit.yml": _UNIT_TEST_YML}

    def test_show_runs_the_model_sql_with_ai(self, project):
        run_dbt(["seed"])
        results, log = run_dbt_and_capture(["show", "--select", "snowflake_sentiment", "--limit",
                                            "3"])
        table = results[0].agate_table
        assert len(table.rows) == 3
        assert {row["sentiment"] for row in table.rows} <= {"positive", "negative"}
        # the limit reaches the AI function: 3 of the 8 reviews are classified, not all of them
        assert [int(n) for n in re.findall(r"(\d+) prompts run", log)] == [3]

    def test_show_inline_duckdb_ai_function(self, project):
        results = run_dbt(["show", "--inline",
                           "select id, ai_classify(review_text, ['positive', 'negative']) as s "
                           "from {{ ref('reviews') }} order by id", "--limit", "2"])
        assert [row["id"] for row in results[0].agate_table.rows] == [1, 2]
        assert {row["s"] for row in results[0].agate_table.rows} <= {"positive", "negative"}

    def test_unit_test_runs_ai_on_fixture_rows(self, project):
        results = run_dbt(["test", "--select", "test_type:unit"])
        assert [str(r.status) for r in results] == ["pass"]
