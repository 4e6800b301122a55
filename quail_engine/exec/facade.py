"""What the CLI, migrate and the dbt adapter use of the executor, built from one SessionConfig.

- `connect(tables, database)`: a DuckDB connection with tables from files and a database.
- `open_session(con, config)`: a QuailSession on a DuckDB connection; `session.execute(sql,
  dialect)` runs one statement and returns a pyarrow Table, `session.report` describes it.
- `model_text(config)` and `load_engine(config, text)`: a model's text side (tokenizer,
  identity, config; no weights) and its engine, for callers that share them between sessions.
- `RowAnswers`: one AI operator's answers for rows of values, outside a planned statement.
- `describe_model`, `ensure_converted`: the model check of `dbt debug` (no weights loaded).
- `result_select(table, source)`: the SELECT that lands a statement's Arrow result with its
  JSON columns as JSON (dbt's materializations).
- `create_ai_function`: one AI operator as a DuckDB function (views' functions in dbt).
- `to_duckdb_sql`, `has_ai_calls`, `ai_ops`, `with_dialect_hint`: the SQL front end as callers
  need it.
- the errors a session raises: QuailError and its kinds.
- `route_stages(sink)`, `STAGE_LOGGER`: where stage messages go (exec/stage_routing.py).
- `estimated_plans(con, parsed, config)`: each core's plan with estimates, no weights read
  (`quail explain` without --analyze; exec/analyze.py).
- what `quail migrate` counts with, laid out and scanned as the executor does: `OpPrompt`,
  `DEFAULT_MAX_TOKENS` (exec/prompts.py), `pair_layout_for` (exec/model_quirks.py), `load_scan`,
  `ScanData` (exec/scans.py) and `scan_error`.

Modules that load DuckDB, sqlglot, pyarrow or numpy (the session, the SQL front end, the
planner) are imported on first use, as are the names of `_HOME` (PEP 562): every `quail` command
imports this module, and its start stays at ~0.15 s instead of ~0.9 s. The engine (torch) loads
with a model, never here (tests/unit/test_layering.py).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from quail_engine.errors import ExecutionError, ModelError, QuailError, SqlError
from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.config import SessionConfig, default_cache_dir
from quail_engine.exec.device_lock import device_lock
from quail_engine.exec.engine_limits import LimitedEngine
from quail_engine.exec.model_check import describe_model, ensure_converted
from quail_engine.exec.model_quirks import pair_layout_for
from quail_engine.exec.report import Report
from quail_engine.exec.scans import ScanData, load_scan
from quail_engine.exec.stage_routing import STAGE_LOGGER, route_stages
from quail_engine.exec.tables import attach_database, land_rows, register_table, seal
from quail_engine.exec.user_errors import MissingTableError, scan_error
from quail_engine.infer.factory import load_engine as load
from quail_engine.infer.model_ref import ModelRef
from quail_engine.replicas.ray_engine import RayEngine
from quail_engine.settings import resolve_device
from quail_engine.sql.dialect_guess import with_dialect_hint as hinted

if TYPE_CHECKING:
    from quail_engine.exec.analyze import estimated_plans
    from quail_engine.exec.prompts import DEFAULT_MAX_TOKENS, OpPrompt

_HOME = {"estimated_plans": "analyze", "DEFAULT_MAX_TOKENS": "prompts", "OpPrompt": "prompts"}

__all__ = [
    "DEFAULT_MAX_TOKENS", "ExecutionError", "MissingTableError", "ModelError", "OpPrompt",
    "QuailError", "RowAnswers", "STAGE_LOGGER", "ScanData", "SessionConfig", "SqlError",
    "ai_ops", "connect", "create_ai_function", "decoder_of", "default_cache_dir",
    "describe_model", "ensure_converted", "estimated_plans", "has_ai_calls", "load_engine",
    "load_scan", "model_text", "open_session", "pair_layout_for", "resolve_device",
    "result_select", "route_stages", "scan_error", "split_write", "to_duckdb_sql", "with_dialect_hint",
    "write_rows",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"quail_engine.exec.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def model_text(config: SessionConfig) -> tuple[Any, Callable[[], Any]]:
    """(PromptText, config getter) of the model `config` names: its tokenizer and identity,
    loaded when first needed, and its config for the cost model, without reading weights. A
    query whose answers are all cached never loads the model."""
    from quail_engine.exec.prompt_text import PromptText  # pyarrow

    resolve = None
    if config.convert_in_child:
        def resolve() -> Any:  # a GGUF converted in a child process first
            ensure_converted(config.model)
            return ModelRef.resolve(config.model)

    return PromptText.of_model(config.model, tokens_dir=config.tokens_dir,
                               variant=config.limits_variant, resolve=resolve)


def load_engine(config: SessionConfig, text: Any = None) -> Any:
    """The engine of `config` (weights read now) with its limits applied; `text`: the
    PromptText whose tokenizer the engine reuses (read once per process)."""
    kwargs: dict[str, Any] = {}
    if config.max_batch_tokens:
        kwargs["token_budget"] = config.max_batch_tokens
    if config.convert_in_child or (config.workers and not config.ray_address):
        ensure_converted(config.model)  # once here, not once per local Ray worker
    if config.is_distributed:  # replicas on Ray workers (quail_engine/replicas), Ray imported now
        # a cluster's `auto` is its workers' to resolve (GPUs there, whatever this host has)
        engine = RayEngine.start(config.model, config.device if config.ray_address
                                 else config.engine_device.name, config.precision, config.workers,
                                 config.ray_address, kwargs)
    else:
        engine = load(config.model, device=config.engine_device, precision=config.precision,
                      resolved=config.answer_precision,
                      tokenizer=None if text is None else text.tokenizer(), **kwargs)
    if config.context_limit or config.max_new_tokens:
        engine = LimitedEngine(engine, config.context_limit, config.max_new_tokens)
    return engine


def connect(tables: Iterable[tuple[str, str]] = (), database: str | None = None,
            sealed: bool = False) -> Any:
    """A new DuckDB connection with every table of `database` (a .duckdb file) visible and each
    (name, path) of `tables` registered (exec/tables.py reads the file kinds). `sealed`: SQL on
    it then reads those files alone (exec/tables.seal)."""
    import duckdb  # off the CLI's start (above)

    con = duckdb.connect()
    files = []
    if database:
        attach_database(con, database)
        files.append(database)
    for name, path in tables:
        files += register_table(con, name, path)
    if sealed:
        seal(con, files)
    return con


_AUTO: Any = object()


def open_session(con: Any, config: SessionConfig, *, text: Any = None,
                 engine_factory: Callable[[], Any] | None = None, decoder: Any = _AUTO,
                 display: Callable[[], Any] | None = None) -> Any:
    """A QuailSession on the DuckDB connection `con`. `text`: a `model_text(config)` result
    to share (default: a new one); `engine_factory`: loads the engine on first use (default:
    `load_engine(config, text)`); `display`: makes a progress display per execution, shown when
    `config.progress` (the caller's: exec draws nothing); `decoder`: (PromptText, engine
    factory) of the model that writes generated text, None for the session's own (default:
    `decoder_of(config)`, or None when `engine_factory` is given). The device and the
    precision are resolved here, once (`config.engine_device`, `config.answer_precision`)."""
    from quail_engine.exec.session import QuailSession  # sqlglot, pyarrow

    prompt_text, model_config = text if text is not None else model_text(config)
    factory = engine_factory or (lambda: load_engine(config, prompt_text))
    return QuailSession(con, factory, config, precision=config.answer_precision,
                        text=prompt_text, model_config=model_config, display=display,
                        decoder=(decoder if decoder is not _AUTO else
                                 None if engine_factory is not None else decoder_of(config)))


def decoder_of(config: SessionConfig
               ) -> tuple[Any, Callable[[], Any], Callable[[], Any]] | None:
    """(PromptText, engine factory, config getter) of the model that writes `config`'s
    generated text when it is not `config.model` (config.decode_model), else None; nothing is
    loaded before use (the config getter reads no weights)."""
    if config.decode_model == config.model:
        return None
    decode = dataclasses.replace(config, model=config.decode_model,
                                 generation_model=config.decode_model,
                                 workers=None, ray_address=None)  # in this process, not on Ray
    text, model_config = model_text(decode)
    return text, lambda: load_engine(decode, text), model_config


class RowAnswers:
    """Answers of one AI operator for rows of binding values, outside a planned statement
    (DuckDB functions that answer a vector of rows at a time), holding the device's lock."""

    def __init__(self, config: SessionConfig, engine: Callable[[], Any]):
        self.config, self._engine = config, engine
        self._runner: Any = None
        self._decoder: Any = None  # the generation model's runner, made on first use

    def answer(self, op: Any, rows: list[tuple]) -> list[Any]:
        from quail_engine.exec.prompts import is_decoded  # sqlglot

        with device_lock(self.config.engine_device.name):
            runner = self._op_runner()
            if is_decoded(op) and self.config.decode_model != self.config.model:
                runner = self._decoder_runner()
            return runner.answer(0, runner.layout(op), rows, unplanned=True)

    def _op_runner(self) -> Any:
        if self._runner is None:
            self._runner = self._new_runner(self._engine())
        return self._runner

    def _decoder_runner(self) -> Any:
        if self._decoder is None:
            text, factory, _ = decoder_of(self.config)
            self._decoder = self._new_runner(factory(), text)
        return self._decoder

    def _new_runner(self, engine: Any, text: Any = None) -> Any:
        from quail_engine.exec.op_runner import OpRunner  # sqlglot, pyarrow

        return OpRunner(engine, AnswerCache.in_dir(self.config.answers_dir), Report(), text=text)


def create_ai_function(con: Any, name: str, op: Any,
                       answer: Callable[[list[tuple]], Any]) -> str:
    """Register the AI operator `op` on the DuckDB connection `con` as the function `name`,
    answering each vector's distinct argument tuples with one `answer(rows)` call."""
    from quail_engine.exec.udfs import create_ai_function as create  # sqlglot, pyarrow

    return create(con, name, op, answer)


def ai_ops(sql: str, dialect: str) -> tuple:
    """The AI operators (sql.ir.AiOp) of `sql` read as `dialect`."""
    from quail_engine.sql.query import parse  # sqlglot

    return tuple(parse(sql, dialect).ai_ops)


def to_duckdb_sql(sql: str, dialect: str) -> str:
    """`sql` in `dialect` as DuckDB SQL (AI calls as the executor's functions)."""
    from quail_engine.sql.query import parse  # sqlglot

    return parse(sql, dialect).duckdb_sql


def has_ai_calls(sql: str, dialect: str) -> bool:
    """True when `sql`, read as `dialect`, calls AI functions (a SqlError if it cannot be
    read)."""
    from quail_engine.sql.query import parse  # sqlglot

    return bool(parse(sql, dialect).ai_ops)


def split_write(sql: str, dialect: str) -> Any:
    """A CREATE TABLE ... AS / INSERT INTO ... <query> statement as its query and where its
    rows go (sql.writes.Write), or None for any other statement."""
    from quail_engine.sql.writes import split_write as split  # sqlglot

    return split(sql, dialect)


def write_rows(database: str, write: Any, table: Any) -> int:
    """Land `table` (the result of `write.query`) in the DuckDB file `database` as `write`
    says, in one transaction; the rows written."""
    from quail_engine.sql.writes import RESULT  # sqlglot

    return land_rows(database, write.statement, RESULT, table)


def result_select(table: Any, source: str) -> str:
    """A SELECT of the Arrow `table` (a statement's result) registered as `source` (SQL text, a
    quoted name) with the DuckDB types the statement gave it: Arrow carries JSON columns as
    strings, and they are cast back (exec/json_columns.py)."""
    from quail_engine.exec.json_columns import landing_select  # pyarrow

    return landing_select(table, source) or f"SELECT * FROM {source}"


def with_dialect_hint(exc: QuailError, sql: str, dialect: str,
                      advice: str = "add --dialect {name}") -> QuailError:
    """`exc`, led by a hint naming the dialect `sql` looks written in when another dialect
    reads it better than `dialect` (`advice` is formatted with that dialect's `name`)."""
    return hinted(exc, sql, dialect, advice)
