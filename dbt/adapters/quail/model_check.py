"""The model as `dbt debug` reports it, without loading it and without transformers in dbt's
process: the check itself is the executor's (quail_engine/exec/model_check.py); here its
problems become dbt errors."""

from __future__ import annotations

from dbt_common.exceptions import DbtRuntimeError

from quail_engine import exec as quail


def describe_model(spec: str | None, device: str) -> list[str]:
    """Lines for `dbt debug` about the model `spec` on `device`; a DbtRuntimeError naming the
    model and the problem when something is missing or broken."""
    spec = spec or "default"
    try:
        return quail.describe_model(spec, device)
    except (quail.QuailError, OSError, ValueError) as exc:
        raise DbtRuntimeError(f"quail cannot use model {spec!r} on {device}: "
                              f"{' '.join(str(exc).split())}") from exc
