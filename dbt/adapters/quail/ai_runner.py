"""Runs a model's AI SQL on the executor: one model copy per engine setting, one job per device.

dbt runs models on several threads; a model copy is loaded once per process (per distinct
model/device/limits) and AI work is serialized per device by a process-wide lock, so with
`threads: 4` relational models keep running in parallel while AI models queue for the device.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.quail.cancel import CancellableEngine
from dbt.adapters.quail.cancel import check as check_cancelled
from dbt.adapters.quail.model_check import describe_model
from quail_engine import exec as quail

logger = AdapterLogger("Quail")
_NO_CACHE = ("off", "none", "false", "")
_ENGINE_KEYS = ("model", "precision", "max_batch_tokens", "max_context", "max_new_tokens",
                "workers", "ray_address")


def session_config(options: dict[str, Any]) -> quail.SessionConfig:
    """The executor's settings from the profile's engine options (credentials.py). A GGUF
    model is converted on first use in a child process: dbt's never imports transformers."""
    cache_dir = options["cache_dir"]
    off = cache_dir is not None and str(cache_dir).strip().lower() in _NO_CACHE
    return quail.SessionConfig(
        model=options["model"] or "default", device=options["device"],
        precision=options.get("precision") or "auto",
        cache_dir=None if off or cache_dir is None else str(cache_dir), use_cache=not off,
        max_batch_tokens=options.get("max_batch_tokens"),
        max_context=options.get("max_context"), max_new_tokens=options.get("max_new_tokens"),
        convert_in_child=True, generation_model=options.get("generation_model") or "auto",
        workers=options.get("workers"), ray_address=options.get("ray_address"))


class AiRunner:
    _RUNNERS: dict[tuple, AiRunner] = {}
    _STATEMENT_LOCKS: dict[str, threading.Lock] = {}
    _ENGINES: dict[tuple, Any] = {}
    _GUARD = threading.Lock()
    _LOAD_LOCK = threading.Lock()

    def __init__(self, options: dict[str, Any]):
        quail.route_stages(logger.info)  # the engine's stage messages (conversion, load, probe)
        self.options = options
        self.config = session_config(options)
        self._rows = quail.RowAnswers(self.config, self.engine)
        self._text: Any = None
        self._decoder: Any = None

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
        return self.config.engine_device.name

    def _statement_lock(self) -> threading.Lock:
        with self._GUARD:
            return self._STATEMENT_LOCKS.setdefault(self.device, threading.Lock())

    def engine(self) -> Any:
        """The loaded engine (loaded on first use; errors name the model and what went wrong).
        Runners that differ only in their answer cache share one engine."""
        key = (self.device, *(self.options.get(k) for k in _ENGINE_KEYS))
        with self._LOAD_LOCK:
            if key not in self._ENGINES:
                self._ENGINES[key] = self._load_engine()
            return self._ENGINES[key]

    def prompt_text(self) -> tuple[Any, Any]:
        """The model's tokenizer side (no weights) and config, shared by this runner's
        sessions: a model whose answers are all cached is never loaded. The profile's limits
        that change answers (context, generated length) are part of the identity."""
        if self._text is None:
            self._text = quail.model_text(self.config)
        return self._text

    def decoder(self, cancelled: threading.Event) -> tuple[Any, Any, Any] | None:
        """(PromptText, engine factory, config getter) of the model that writes generated text
        when it is not the profile's model; its engine is loaded once and shared like the main
        one, its config (no weights) sizes an aggregate's map chunk in the plan."""
        if self._decoder is None:
            self._decoder = quail.decoder_of(self.config) or ()
        if not self._decoder:
            return None
        text, factory, model_config = self._decoder
        key = (self.device, "writes", self.config.decode_model,
               *(self.options.get(k) for k in _ENGINE_KEYS[1:]))

        def engine() -> Any:
            with self._LOAD_LOCK:
                if key not in self._ENGINES:
                    self._ENGINES[key] = self._load_engine(self.config.decode_model, factory)
            return CancellableEngine(self._ENGINES[key], cancelled)

        return text, engine, model_config

    def check_model(self) -> None:
        """What `dbt debug` says about the model: resolved, tokenizer and weights checked, no
        weights loaded and no transformers imported (quail_engine/exec/model_check.py)."""
        for line in describe_model(self.options["model"], self.device):
            logger.info(line)

    def run(self, sql: str, dialect: str, cursor: Any, model_name: str,
            cancelled: threading.Event | None = None) -> tuple[Any, Any]:
        """Execute `sql` (in `dialect`) on `cursor` with its AI operators on the engine: the
        Arrow result and the executor's report (exec/report.py).
        `cancelled`: set when dbt cancels the run (Ctrl-C); the AI work stops at the engine's
        next batch and this raises (cancel.py).

        AI statements on one device run one at a time (their planning, engine work and the
        DuckDB statement around them), while other threads' relational models keep running.
        This is a lock of its own, not the executor's device lock, which the executor takes
        around engine work only (DuckDB calls functions from its worker threads, so holding
        that lock across a statement would deadlock on any function that needs the engine).
        """
        _refuse_ai_views(sql, cursor, model_name)
        cancelled = cancelled or threading.Event()
        session = quail.open_session(
            cursor, self.config, text=self.prompt_text(),
            engine_factory=lambda: CancellableEngine(self.engine(), cancelled),
            decoder=self.decoder(cancelled))
        with self._statement_lock():
            try:
                check_cancelled(cancelled)
                logger.info(f"{model_name}: running AI operators ({dialect} SQL) on "
                            f"{self.device}")
                table = session.execute(sql, dialect)
            except quail.QuailError as exc:
                if cancelled.is_set():  # also when DuckDB wrapped it (an AI call in a UDF)
                    message = (f"{model_name}: cancelled; its table is left as it was (answers "
                               "computed so far are cached)")
                    logger.info(message)  # dbt prints no node error after a keyboard interrupt
                    raise DbtRuntimeError(message) from None
                raise DbtRuntimeError(
                    f"quail could not run {model_name}: {_for_dbt(exc, sql, dialect)}") from exc
            finally:
                session.close()
            report = session.report
            hits = sum(o.cache_hits for o in report.ops.values())
            computed = sum(o.prompts for o in report.ops.values()) - hits
            logger.info(
                f"{model_name}: {table.num_rows} rows, {computed} prompts run, {hits} answers from "
                f"cache, {report.fresh_tokens} tokens, {report.wall_s:.2f} s on "
                f"{_models(report)} ({self.device})")
        return table, report

    def answer_rows(self, op: Any, rows: list[tuple]) -> list[Any]:
        """Answers of one AI operator for `rows` of binding values (the in-DuckDB path)."""
        return self._rows.answer(op, rows)

    def _load_engine(self, spec: str | None = None, load: Any = None) -> Any:
        """The engine `load()` gives (default: the profile's model), timed and logged, its
        errors naming the model `spec`."""
        spec = spec or self.config.model
        start = time.perf_counter()
        try:
            engine = (load or (lambda: quail.load_engine(self.config, self.prompt_text()[0])))()
        except (quail.QuailError, OSError, ValueError) as exc:
            raise DbtRuntimeError(
                f"quail could not load model {spec!r} on {self.device}: {exc}") from exc
        logger.info(f"loaded model {spec!r} on {self.device} in "
                    f"{time.perf_counter() - start:.1f} s")
        return engine


def _models(report: Any) -> str:
    """The models that ran, as the run's summary line names them."""
    names = [report.model, *([f"{report.generation_model} (wrote text)"]
                             if report.generation_model else [])]
    return " + ".join(n for n in names if n) or "no model"


def _for_dbt(exc: Exception, sql: str, dialect: str) -> Exception:
    """`exc` in a dbt user's terms: a missing table is built upstream, not passed with --table,
    and SQL of another warehouse names the `quail_dialect` to set."""
    if isinstance(exc, quail.MissingTableError):
        exc = quail.MissingTableError(exc.table, exc.sql, exc.suggestion,
                                      hint="build it first (a seed, a source or an upstream "
                                           "model)")
    if isinstance(exc, (quail.SqlError, quail.ExecutionError)):
        exc = quail.with_dialect_hint(exc, sql, dialect, "set quail_dialect='{name}' on the "
                                                         "model (or dialect: {name} in the "
                                                         "profile)")
    return exc


def _refuse_ai_views(sql: str, cursor: Any, model_name: str) -> None:
    """An AI statement must not read a view that calls AI functions (only databases built by
    earlier versions hold them): the executor holds the device while it scans, and the view's
    functions would wait for it forever."""
    views = cursor.execute("select view_name from duckdb_views() "
                           "where sql ilike '%quail_ai_%'").fetchall()
    lowered = sql.lower()
    for (name,) in views:
        if re.search(rf"(?<![\w$]){re.escape(name.lower())}(?![\w$])", lowered):
            raise DbtRuntimeError(
                f"{model_name} runs AI functions over the view {name!r}, which calls AI "
                "functions itself (built by an earlier version of dbt-quail); rebuild it with "
                f"`dbt run --select {name}`, which makes it a table")
