"""Plain warehouse SQL (no AI) in a model with `quail_dialect` is translated to DuckDB and needs no
model at all; a bad `quail_dialect` fails the model with a message that quotes it."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

pytestmark = pytest.mark.dbt

# (model name, dialect, materialization, SQL, expected value of column `v`)
_CASES = [
    ("sf_iff", "snowflake", "table", "select iff(2 > 1, 'yes', 'no') as v", "yes"),
    ("sf_view", "snowflake", "view", "select iff(2 < 1, 'yes', 'no') as v", "no"),
    ("bq_safe_divide", "bigquery", "table", "select safe_divide(1, 0) as v", None),
    ("bq_countif", "bigquery", "table",
     "select countif(x > 1) as v from unnest([1, 2, 3]) as x", 2),
    ("dbx_nvl", "databricks", "table", "select nvl(null, 'fallback') as v", "fallback"),
    ("duck_plain", "duckdb", "table", "select list_value(1, 2)[2] as v", 2),
]


class TestWarehouseSqlWithoutAi:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"{name}.sql": f"{{{{ config(materialized='{mat}', quail_dialect='{dialect}') }}}}"
                               f"\n{sql}\n" for name, dialect, mat, sql, _ in _CASES}

    def test_each_model_gives_the_warehouse_answer(self, project):
        run_dbt(["run"])
        for name, _, _, _, expected in _CASES:
            got = project.run_sql(f"select v from {project.test_schema}.{name}", fetch="one")[0]
            assert got == expected, name


class TestBadDialectIsNamed:
    @pytest.fixture(scope="class")
    def models(self):
        return {"oracle_model.sql": "{{ config(quail_dialect='oracle') }}\nselect 1 as v\n"}

    def test_run_fails_quoting_the_dialect(self, project):
        _, out = run_dbt_and_capture(["run"], expect_pass=False)
        assert "quail_dialect" in out and "'oracle'" in out
