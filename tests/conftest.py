"""Fixtures shared by every test folder."""

import os

import pytest


def pytest_configure(config):
    """Under pytest-xdist (README's test command runs two workers) each worker gets its own
    cache root, so the workers' AI statements do not queue on one device lock (a lock file under
    the cache root, exec/device_lock.py) and their answer caches stay apart; the converted models
    stay shared through a link (conversion is safe across processes:
    tests/unit/infer/test_cache_layout.py). Child processes (dbt, the CLI) inherit it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    from quail_engine.settings import cache_root

    shared = cache_root()
    root = shared / "xdist" / worker
    root.mkdir(parents=True, exist_ok=True)
    (shared / "models").mkdir(parents=True, exist_ok=True)
    models = root / "models"
    if not models.exists() and not models.is_symlink():
        models.symlink_to((shared / "models").resolve(), target_is_directory=True)
    os.environ["QUAIL_CACHE_DIR"] = str(root)


@pytest.fixture(scope="session")
def require_embedded():
    """`require_embedded(spec)`: the embedded model's GGUF path, or a skip when its optional
    wheel is missing on a developer's machine. In CI (README's test command installs both
    wheels) and on a SHA-256 mismatch it fails instead: never a silent skip there."""
    from quail_engine.errors import ModelError
    from quail_engine.infer.embedded import embedded_gguf

    def check(spec: str):
        try:
            return embedded_gguf(spec)
        except ModelError as exc:
            if os.environ.get("CI") or "SHA-256" in str(exc):
                raise
            pytest.skip(f"{spec} not installed: {exc}")
    return check
