"""Inference engine. The request API (api.py) imports no torch; `LocalEngine` loads lazily so the
planner can import this package on machines without torch."""

from quail_engine.infer.api import (
    Answer,
    BooleanReadout,
    Engine,
    EngineStats,
    GenerateReadout,
    LabelReadout,
    PrefixHandle,
    Request,
    ScoreReadout,
)

__all__ = ["Answer", "BooleanReadout", "Engine", "EngineStats", "GenerateReadout", "LabelReadout",
           "LocalEngine", "PrefixHandle", "Request", "ScoreReadout"]


def __getattr__(name: str):
    if name == "LocalEngine":
        from quail_engine.infer.engine import LocalEngine  # (deferred: torch, as above)

        return LocalEngine
    raise AttributeError(f"module 'quail_engine.infer' has no attribute {name!r}")
