"""The generic tests shipped in dbt/include/quail, used from schema.yml with no package install,
on a labelled table: each case states whether `dbt test` must pass or fail."""

import pytest
from dbt.tests.util import run_dbt

pytestmark = pytest.mark.dbt

_LABELS_CSV = """id,sentiment
1,positive
2,positive
3,positive
4,negative
5,Negative
"""

_GOLDEN_CSV = """id,label
1,positive
2,positive
3,negative
4,negative
5,negative
"""

_CASES = [
    ("share_under_bound", "quail_max_label_share", {"max_share": 0.7}, "pass"),
    ("share_over_bound", "quail_max_label_share", {"max_share": 0.5}, "fail"),
    ("share_under_min", "quail_max_label_share", {"max_share": 1.0, "min_share": 0.3}, "fail"),
    ("agreement_enough", "quail_golden_agreement",
     {"golden": "ref('golden')", "key": "id", "golden_column": "label",
      "min_agreement": 0.8}, "pass"),
    ("agreement_too_low", "quail_golden_agreement",
     {"golden": "ref('golden')", "key": "id", "golden_column": "label",
      "min_agreement": 0.9}, "fail"),
    ("agreement_no_shared_rows", "quail_golden_agreement",
     {"golden": "ref('golden_elsewhere')", "key": "id", "golden_column": "label"}, "fail"),
]


def _schema_yml() -> str:
    lines = ["version: 2", "models:", "  - name: labelled", "    columns:",
             "      - name: sentiment", "        data_tests:"]
    for name, test, arguments, _ in _CASES:
        lines += [f"          - {test}:", f"              name: {name}", "              arguments:"]
        lines += [f"                {k}: \"{v}\"" if isinstance(v, str) else f"                {k}: {v}"
                  for k, v in arguments.items()]
    return "\n".join(lines) + "\n"


class TestQuailGenericTests:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"labels.csv": _LABELS_CSV, "golden.csv": _GOLDEN_CSV,
                "golden_elsewhere.csv": "id,label\n10,positive\n11,negative\n"}

    @pytest.fixture(scope="class")
    def models(self):
        return {"labelled.sql": "select * from {{ ref('labels') }}", "schema.yml": _schema_yml()}

    def test_each_case_passes_or_fails_as_stated(self, project):
        run_dbt(["seed"])
        run_dbt(["run"])
        results = run_dbt(["test"], expect_pass=False)
        status = {r.node.name: str(r.status) for r in results}
        assert status == {name: expected for name, _, _, expected in _CASES}


class TestQuailGenericTestsUnderASnowflakeProfile(TestQuailGenericTests):
    """dbt's test SQL is DuckDB whatever the profile's dialect: it must not be translated."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        return {**dbt_profile_target, "dialect": "snowflake"}

    @pytest.fixture(scope="class")
    def models(self):
        return {"labelled.sql": "{{ config(quail_dialect='duckdb') }}\n"
                                "select * from {{ ref('labels') }}",
                "schema.yml": _schema_yml()}

    @pytest.fixture(scope="class")
    def tests(self):
        # DuckDB lists are 1-based, Snowflake arrays 0-based: read as Snowflake, this fails
        return {"list_index_is_duckdb.sql": "select v from (select [10, 20][1] as v) where v <> 10"}

    def test_each_case_passes_or_fails_as_stated(self, project):
        run_dbt(["seed"])
        run_dbt(["run"])
        results = run_dbt(["test"], expect_pass=False)
        status = {r.node.name: str(r.status) for r in results}
        expected = {name: outcome for name, _, _, outcome in _CASES}
        assert status == {**expected, "list_index_is_duckdb": "pass"}
