"""Fixtures shared by every test folder."""

import os

import pytest


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
