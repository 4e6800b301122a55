"""The profile fields `workers:` and `ray_address:` reach the executor's SessionConfig (which
then runs the model's replicas on Ray: tests/e2e/test_ray_backend.py); without them the engine
stays in dbt's process."""

import pytest

from dbt.adapters.quail.ai_runner import session_config
from dbt.adapters.quail.credentials import QuailCredentials


@pytest.mark.parametrize(("fields", "workers", "address"), [
    ({}, None, None),
    ({"workers": 4}, 4, None),
    ({"ray_address": "head:6379"}, None, "head:6379"),
    ({"workers": 2, "ray_address": "auto"}, 2, "auto"),
])
def test_profile_fields_select_the_ray_backend(fields, workers, address):
    creds = QuailCredentials(database="memory", schema="main", **fields)
    config = session_config(creds.engine_options())
    assert (config.workers, config.ray_address, config.is_distributed) == (
        workers, address, bool(fields))


@pytest.mark.parametrize("bad", [0, -2, "two", True])
def test_a_bad_workers_field_is_refused_with_the_value(bad):
    with pytest.raises(Exception, match="'workers' must be a positive integer"):
        QuailCredentials(database="memory", schema="main", workers=bad)
