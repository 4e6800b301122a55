"""Python models through `type: quail` (dbt-duckdb's environment must be found by its base-class
name). Each class starts with no DuckDB environment at all, so a test cannot pass on one an
earlier `type: duckdb` test left behind."""

import pytest
from dbt.adapters.duckdb.connections import DuckDBConnectionManager
from dbt.tests.adapter.python_model.test_python_model import (
    BasePythonIncrementalTests,
    BasePythonModelTests,
    m_1,
)
from dbt.tests.util import run_dbt

pytestmark = pytest.mark.dbt

_INCREMENTAL_PY = """
def model(dbt, session):
    dbt.config(materialized="incremental", unique_key="id")
    rel = dbt.ref("m_1")
    if dbt.is_incremental:
        rel = rel.filter("id > 5")
    return rel
"""

_ARROW_PY = """
import pyarrow as pa

def model(dbt, con):
    return pa.Table.from_pydict({"a": [1, 2, 3]})
"""


@pytest.fixture(scope="class", autouse=True)
def no_leftover_environment():
    DuckDBConnectionManager.close_all_connections()
    assert DuckDBConnectionManager._ENV is None
    yield


class TestPythonModelQuail(BasePythonModelTests):
    pass


class TestPythonIncrementalQuail(BasePythonIncrementalTests):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+incremental_strategy": "delete+insert"}}

    @pytest.fixture(scope="class")
    def models(self):
        return {"m_1.sql": m_1, "incremental.py": _INCREMENTAL_PY}


class TestPythonArrowModelsThreadedQuail:
    @pytest.fixture(scope="class")
    def models(self):
        return {f"arrow_{i}.py": _ARROW_PY for i in range(4)}

    def test_all_models_land(self, project):
        results = run_dbt(["run", "--threads", "4"])
        assert len(results) == 4
        total = project.run_sql(
            f"select sum(a) from {project.test_schema}.arrow_3", fetch="one")[0]
        assert total == 6
