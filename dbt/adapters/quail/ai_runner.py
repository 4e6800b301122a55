"""Runs a model's AI SQL on the executor: one model copy per engine setting, one job per device.

dbt runs models on several threads; a model copy is loaded once per process (per distinct
model/device/limits) and AI work is serialized per device by a process-wide lock, so with
`threads: 4` relational models keep running in parallel while AI models queue for the device.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

logger = AdapterLogger("Quail")


class AiRunner:
    _RUNNERS: dict[tuple, AiRunner] = {}
    _DEVICE_LOCKS: dict[str, threading.Lock] = {}
    _GUARD = threading.Lock()

    def __init__(self, options: dict[str, Any]):
        self.options = options
        self._engine: Any = None
        self._load_lock = threading.Lock()

    @classmethod
    def for_credentials(cls, credentials: Any) -> AiRunner:
        options = credentials.engine_options()
        key = tuple(sorted(options.items()))
        with cls._GUARD:
            if key not in cls._RUNNERS:
                cls._RUNNERS[key] = cls(options)
            return cls._RUNNERS[key]

    @property
    def device(self) -> str:
        device = self.options["device"]
        if device == "auto":
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        return "cuda:0" if device == "cuda" else device

    @contextmanager
    def device_lock(self) -> Iterator[None]:
        """Held while AI work runs: one AI job at a time on each device, whatever the thread."""
        with self._GUARD:
            lock = self._DEVICE_LOCKS.setdefault(self.device, threading.Lock())
        with lock:
            yield

    def engine(self) -> Any:
        """The loaded engine (loaded on first use; errors name the model and what went wrong)."""
        with self._load_lock:
            if self._engine is None:
                self._engine = self._load_engine()
            return self._engine

    def check_model(self) -> None:
        engine = self.engine()
        logger.info(f"model {engine.model_id} loads on {self.device}")

    def run(self, sql: str, dialect: str, cursor: Any, model_name: str) -> Any:
        """Execute `sql` (in `dialect`) on `cursor` with its AI operators on the engine."""
        from quail_engine.errors import QuailError

        with self.device_lock():
            engine = self.engine()
            before = _token_count(engine)
            start = time.perf_counter()
            try:
                session = self._session(cursor, engine)
                table = session.execute(sql, dialect)
            except QuailError as exc:
                raise DbtRuntimeError(f"quail could not run {model_name}: {exc}") from exc
            seconds = time.perf_counter() - start
            tokens = _token_count(engine) - before
        hits = _report_value(session, "cache_hits")
        logger.info(
            f"{model_name}: {table.num_rows} rows, {tokens} tokens, {seconds:.2f} s "
            f"on {engine.model_id} ({self.device})"
            + (f", {hits} answers from cache" if hits is not None else ""))
        return table

    def _session(self, cursor: Any, engine: Any) -> Any:
        try:
            from quail_engine.exec import QuailSession
        except ImportError as exc:
            raise DbtRuntimeError(
                "quail's executor (quail_engine.exec.QuailSession) is not available in this "
                f"installation: {exc}") from exc
        return QuailSession(cursor, engine_factory=lambda: engine,
                            cache_dir=self.options["cache_dir"])

    def _load_engine(self) -> Any:
        from quail_engine.errors import QuailError
        from quail_engine.infer.engine import LocalEngine

        spec = self.options["model"] or "default"
        kwargs = {}
        if self.options.get("max_batch_tokens"):
            kwargs["token_budget"] = self.options["max_batch_tokens"]
        start = time.perf_counter()
        try:
            engine = LocalEngine.load(spec, device=self.device, **kwargs)
        except (QuailError, OSError, ValueError) as exc:
            raise DbtRuntimeError(
                f"quail could not load model {spec!r} on {self.device}: {exc}") from exc
        logger.info(f"loaded model {spec!r} on {self.device} in "
                    f"{time.perf_counter() - start:.1f} s")
        return engine


def _token_count(engine: Any) -> int:
    stats = getattr(engine, "stats", None)
    return int(getattr(stats, "fresh_tokens", 0) or 0) + int(getattr(stats, "decode_tokens", 0) or 0)


def _report_value(session: Any, name: str) -> Any:
    report = getattr(session, "report", None)
    if callable(report):
        report = report()
    if isinstance(report, dict):
        return report.get(name)
    return getattr(report, name, None)
