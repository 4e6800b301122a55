"""dbt-quail: dbt-duckdb plus warehouse AI functions run on a local model (`type: quail`)."""

from dbt.adapters.base import AdapterPlugin

from dbt.adapters.quail.connections import QuailConnectionManager  # noqa: F401
from dbt.adapters.quail.credentials import QuailCredentials
from dbt.adapters.quail.impl import QuailAdapter
from dbt.include import quail

Plugin = AdapterPlugin(
    adapter=QuailAdapter,  # type: ignore[arg-type]
    credentials=QuailCredentials,
    include_path=quail.PACKAGE_PATH,
    dependencies=["duckdb"],
)
