"""The official dbt-tests-adapter basic suite, plus dbt show, query comments, unit tests and
docs generate, run against `type: quail` with no AI in sight: dbt-duckdb's behaviour, unchanged."""

import pytest
from dbt.tests.adapter.basic.expected_catalog import (
    base_expected_catalog,
    expected_references_catalog,
    no_stats,
)
from dbt.tests.adapter.basic.test_adapter_methods import BaseAdapterMethod
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_docs_generate import BaseDocsGenerate, BaseDocsGenReferences
from dbt.tests.adapter.basic.test_empty import BaseEmpty
from dbt.tests.adapter.basic.test_ephemeral import BaseEphemeral
from dbt.tests.adapter.basic.test_generic_tests import BaseGenericTests
from dbt.tests.adapter.basic.test_incremental import (
    BaseIncremental,
    BaseIncrementalNotSchemaChange,
)
from dbt.tests.adapter.basic.test_singular_tests import BaseSingularTests
from dbt.tests.adapter.basic.test_singular_tests_ephemeral import BaseSingularTestsEphemeral
from dbt.tests.adapter.basic.test_snapshot_check_cols import BaseSnapshotCheckCols
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp
from dbt.tests.adapter.basic.test_validate_connection import BaseValidateConnection
from dbt.tests.adapter.dbt_show.test_dbt_show import (
    BaseShowDoesNotHandleDoubleLimit,
    BaseShowLimit,
    BaseShowSqlHeader,
)
from dbt.tests.adapter.query_comment.test_query_comment import (
    BaseEmptyQueryComments,
    BaseMacroArgsQueryComments,
    BaseMacroInvalidQueryComments,
    BaseMacroQueryComments,
    BaseNullQueryComments,
    BaseQueryComments,
)
from dbt.tests.adapter.unit_testing.test_case_insensitivity import BaseUnitTestCaseInsensivity
from dbt.tests.adapter.unit_testing.test_invalid_input import BaseUnitTestInvalidInput
from dbt.tests.adapter.unit_testing.test_types import BaseUnitTestingTypes

pytestmark = pytest.mark.dbt

_CATALOG_TYPES = dict(role=None, id_type="INTEGER", text_type="VARCHAR", time_type="TIMESTAMP",
                      view_type="VIEW", table_type="BASE TABLE")


class TestSimpleMaterializationsQuail(BaseSimpleMaterializations):
    pass


class TestSingularTestsQuail(BaseSingularTests):
    pass


class TestSingularTestsEphemeralQuail(BaseSingularTestsEphemeral):
    pass


class TestEmptyQuail(BaseEmpty):
    pass


class TestEphemeralQuail(BaseEphemeral):
    pass


class TestIncrementalQuail(BaseIncremental):
    pass


class TestIncrementalNotSchemaChangeQuail(BaseIncrementalNotSchemaChange):
    pass


class TestGenericTestsQuail(BaseGenericTests):
    pass


class TestSnapshotCheckColsQuail(BaseSnapshotCheckCols):
    pass


class TestSnapshotTimestampQuail(BaseSnapshotTimestamp):
    pass


class TestAdapterMethodQuail(BaseAdapterMethod):
    pass


class TestValidateConnectionQuail(BaseValidateConnection):
    pass


class TestDocsGenerateQuail(BaseDocsGenerate):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        return base_expected_catalog(project, model_stats=no_stats(), **_CATALOG_TYPES)


class TestDocsGenReferencesQuail(BaseDocsGenReferences):
    @pytest.fixture(scope="class")
    def expected_catalog(self, project):
        return expected_references_catalog(project, model_stats=no_stats(), bigint_type="BIGINT",
                                           **_CATALOG_TYPES)


class TestShowLimitQuail(BaseShowLimit):
    pass


class TestShowSqlHeaderQuail(BaseShowSqlHeader):
    pass


class TestShowDoesNotHandleDoubleLimitQuail(BaseShowDoesNotHandleDoubleLimit):
    DATABASE_ERROR_MESSAGE = "syntax error"


class TestQueryCommentsQuail(BaseQueryComments):
    pass


class TestMacroQueryCommentsQuail(BaseMacroQueryComments):
    pass


class TestMacroArgsQueryCommentsQuail(BaseMacroArgsQueryComments):
    pass


class TestMacroInvalidQueryCommentsQuail(BaseMacroInvalidQueryComments):
    pass


class TestNullQueryCommentsQuail(BaseNullQueryComments):
    pass


class TestEmptyQueryCommentsQuail(BaseEmptyQueryComments):
    pass


class TestUnitTestCaseInsensitivityQuail(BaseUnitTestCaseInsensivity):
    pass


class TestUnitTestInvalidInputQuail(BaseUnitTestInvalidInput):
    pass


class TestUnitTestingTypesQuail(BaseUnitTestingTypes):
    pass
