"""An AI model's work reaches dbt's artifacts: its adapter_response in target/run_results.json
carries rows, tokens, cache hits and seconds (a plain SQL model's stays dbt-duckdb's), and the
model's result line says it; a second run answers from the cache."""

import json
import re
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

pytestmark = [pytest.mark.dbt, pytest.mark.model]

_REVIEWS = """id,review_text
1,I love this blender. It works perfectly and makes great smoothies.
2,Terrible kettle. It broke after two days and leaks water everywhere.
3,Fantastic headphones with amazing sound. Best purchase this year.
4,The toaster burns every slice. Awful and a complete waste of money.
"""

_AI_MODEL = """
{{ config(materialized='table', quail_dialect='snowflake') }}
select id, AI_CLASSIFY(review_text, ['positive', 'negative']):labels[0]::string as sentiment
from {{ ref('reviews') }}
"""

_INCREMENTAL_AI_MODEL = """
{{ config(materialized='incremental', unique_key='id', quail_dialect='snowflake') }}
select id from {{ ref('reviews') }}
where AI_FILTER(PROMPT('Is this review about a kitchen appliance? {0}', review_text))
{% if is_incremental() %} and id > (select coalesce(max(id), 0) from {{ this }}) {% endif %}
"""

_PLAIN_MODEL = "select id, length(review_text) as n from {{ ref('reviews') }}"


def _responses(project) -> dict[str, dict]:
    path = Path(project.project_root) / "target" / "run_results.json"
    results = json.loads(path.read_text())["results"]
    return {r["unique_id"].split(".")[-1]: r["adapter_response"] for r in results}


class TestAiWorkInRunResults:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"reviews.csv": _REVIEWS}

    @pytest.fixture(scope="class")
    def models(self):
        return {"sentiment.sql": _AI_MODEL, "lengths.sql": _PLAIN_MODEL,
                "kitchen.sql": _INCREMENTAL_AI_MODEL}

    def test_adapter_response_carries_the_ai_work(self, project):
        run_dbt(["seed"])
        _, log = run_dbt_and_capture(["run"])
        first = _responses(project)
        ai = first["sentiment"]
        assert ai["rows_affected"] == 4
        assert ai["prompts"] == 4 and ai["prompts_run"] + ai["cache_hits"] == 4
        assert ai["prompts_run"] > 0
        assert 0 < ai["fresh_tokens"] <= ai["requested_tokens"]
        # the model load happened inside this model's run and is counted once
        assert ai["seconds"] > 0 and 0 <= ai["load_seconds"] <= ai["seconds"]
        assert 0 < ai["sol_seconds"] < ai["seconds"]
        assert ai["device"] and ai["ai_model"] and ai["plan"]
        assert ai["_message"].startswith("OK: 4 rows, ")
        plain = re.sub(r"\x1b\[[0-9;]*m", "", log)
        assert "sentiment  [OK: 4 rows, 4 prompts run, 0 from cache, " in plain  # result line

        assert first["lengths"] == {"_message": "OK"}  # plain SQL: dbt-duckdb's response
        kitchen = first["kitchen"]
        rows = project.run_sql(f"select count(*) from {project.test_schema}.kitchen", fetch="one")
        assert kitchen["rows_affected"] == rows[0] and kitchen["prompts"] == 4

        run_dbt(["run", "--select", "sentiment", "kitchen"])
        second = _responses(project)
        # an incremental run: the AI work is read in one statement, merged by a later one
        assert second["kitchen"]["rows_affected"] == 0 == second["kitchen"]["prompts_run"]
        assert second["kitchen"]["_message"].startswith("OK: 0 rows")
        again = second["sentiment"]
        assert again["cache_hits"] == 4 and again["prompts_run"] == 0
        assert again["fresh_tokens"] == 0 == again["requested_tokens"]  # nothing asked of the model
        assert again["rows_affected"] == 4

        run_dbt(["docs", "generate"])
        catalog = json.loads((Path(project.project_root) / "target" / "catalog.json").read_text())
        stats = catalog["nodes"]["model.test.sentiment"]["stats"]
        assert stats["quail_ai_rows"]["value"] == "4 rows"
        assert stats["quail_ai_prompts"]["value"] == "0 run, 4 from cache"  # the last run's
        assert stats["quail_ai_tokens"]["value"] == "0 fresh of 0 requested"
        assert stats["quail_ai_plan"]["value"] == again["plan"]
        assert stats["quail_ai_sol"]["value"].endswith(f" s on {again['device']}")
        assert not [k for k in catalog["nodes"]["model.test.lengths"]["stats"] if "quail" in k]
