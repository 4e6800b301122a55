"""A failing AI model says what to change in dbt terms: the `quail_dialect` for SQL of another
warehouse, and a missing table is built upstream (never `--table`, never quail_ai_<n> names)."""

import pytest
from dbt_subprocess import run, write_project

pytestmark = pytest.mark.dbt

_BIGQUERY = """
select id, AI.IF(('Is this review positive? ', review_text)) as is_positive
from {{ ref('reviews') }}
"""

_MISSING = """
{{ config(quail_dialect='snowflake') }}
select id, AI_FILTER(PROMPT('Positive? {0}', review_text)) as ok from main.no_such_reviews
"""


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    root = write_project(tmp_path_factory.mktemp("hints"), {
        "seeds/reviews.csv": "id,review_text\n1,great\n",
        "models/bq_in_duckdb.sql": "{{ config(materialized='table') }}" + _BIGQUERY,
        "models/missing_table.sql": "{{ config(materialized='table') }}" + _MISSING})
    run(root, "seed")
    done = run(root, "run", check=False)
    assert done.returncode == 1
    return done.stdout


def test_bigquery_sql_under_the_duckdb_profile_names_quail_dialect(failed_run):
    assert ("this looks like BigQuery SQL: set quail_dialect='bigquery' on the model "
            "(or dialect: bigquery in the profile)") in failed_run


def test_missing_table_says_build_it_first(failed_run):
    assert "table 'no_such_reviews' is not defined: build it first" in failed_run
    assert "--table" not in failed_run and "quail_ai_" not in failed_run
