"""A dbt model whose SELECT calls a JSON-returning AI function lands that column as DuckDB JSON,
as a table and as an incremental model, and a downstream model reads a field of it with
Snowflake's `:` path. The executor hands the model's rows over as Arrow, where DuckDB writes a
JSON value as a plain string: the column used to land as VARCHAR."""

import json

import pytest
from dbt.tests.util import run_dbt

pytestmark = [pytest.mark.dbt, pytest.mark.model]

_PEOPLE = """id,note
1,Alice paid 45 dollars in Paris.
2,Bob wants a refund.
"""

_EXTRACT = """
{{{{ config(materialized='{materialized}', quail_dialect='snowflake') }}}}
select id, AI_EXTRACT(note, {{'name': 'Who is named?'}}) as extracted
from {{{{ ref('people') }}}}
"""

_NAMES = """
{{ config(materialized='table', quail_dialect='snowflake') }}
select id, extracted:response:name::string as name from {{ ref('extracted_table') }}
"""


class TestAiJsonColumnsLandAsJson:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"people.csv": _PEOPLE}

    @pytest.fixture(scope="class")
    def models(self):
        return {"extracted_table.sql": _EXTRACT.format(materialized="table"),
                "extracted_incremental.sql": _EXTRACT.format(materialized="incremental"),
                "names.sql": _NAMES}

    def test_extracted_object_is_json_downstream_reads_a_field(self, project):
        run_dbt(["seed"])
        run_dbt(["run", "--threads", "1"])
        run_dbt(["run", "--threads", "1", "--select", "extracted_incremental"])
        schema = project.test_schema
        types = dict(project.run_sql(
            "select table_name, data_type from information_schema.columns where table_schema = "
            f"'{schema}' and column_name = 'extracted'", fetch="all"))
        assert types == {"extracted_table": "JSON", "extracted_incremental": "JSON"}
        objects = project.run_sql(f"select id, extracted from {schema}.extracted_table "
                                  "order by id", fetch="all")
        names = project.run_sql(f"select id, name from {schema}.names order by id", fetch="all")
        assert [i for i, _ in names] == [1, 2]
        for (_, extracted), (_, name) in zip(objects, names):
            assert set(json.loads(extracted)["response"]) == {"name"}
            assert name == json.loads(extracted)["response"]["name"]
        assert any(name for _, name in names)
