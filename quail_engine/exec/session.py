"""QuailSession: run one AI-SQL statement on a DuckDB connection and a local model.

DuckDB runs the whole statement (transpiled by the SQL front end); each AI call is a
`quail_ai_<id>` UDF reading precomputed answers. Before the statement runs, every core is
planned and its answers precomputed in the planned order. Errors in the SQL (unknown tables or
columns) surface before any prompt runs.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable, Sequence

import pyarrow as pa

from quail_engine.errors import QuailError
from quail_engine.exec import engine_thread
from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.config import SessionConfig
from quail_engine.exec.core_runner import CoreRunner
from quail_engine.exec.device_lock import StatementLock, device_lock
from quail_engine.exec.gc_tuning import relaxed_gc
from quail_engine.exec.json_columns import statement_arrow
from quail_engine.exec.limit_pushdown import push_limit
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.pass_tables import register_pass_tables, unregister_pass_tables
from quail_engine.exec.progress_sink import NullProgress
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.prompts import DECODED
from quail_engine.exec.report import Report
from quail_engine.exec.tasks import task_grammar
from quail_engine.exec.udfs import (
    emit,
    prepare,
    prepare_scan,
    read_statement,
    register_keyed_udfs,
    register_udfs,
    unregister_udfs,
)
from quail_engine.exec.user_errors import statement_error
from quail_engine.plan import batching
from quail_engine.plan.call_order import cached_answers_for
from quail_engine.plan.cost import ModelSpec, Work, num_passes, seconds
from quail_engine.plan.device import device_spec
from quail_engine.sql.query import parse

log = logging.getLogger(__name__)


class _LazyEngine:
    """Loads the engine on first use, so SQL errors are reported before a model loads.
    `nested_s`: what `inner_load()` (the tokenizer's load clock) ran up inside that load, so
    the report does not count it twice."""

    def __init__(self, factory: Callable[[], object],
                 inner_load: Callable[[], float] = lambda: 0.0):
        self._factory, self._engine, self._inner_load = factory, None, inner_load
        self.load_s = self.nested_s = 0.0
        self._on_load: list[Callable[[object], None]] = []

    def get(self):
        if self._engine is None:
            start, inner0 = time.perf_counter(), self._inner_load()
            self._engine = self._factory()
            self.load_s = time.perf_counter() - start
            self.nested_s = self._inner_load() - inner0
            hooks, self._on_load = self._on_load, []
            for hook in hooks:
                hook(self._engine)
        return self._engine

    def when_loaded(self, hook: Callable[[object], None]) -> Callable[[], None]:
        """hook(engine) once the engine is loaded: now if it is, else right after its load
        (never, if nothing loads it: a query whose answers are all cached). -> a callable that
        drops the hook if it has not run (a statement's hooks end with it)."""
        if self._engine is not None:
            hook(self._engine)
            return lambda: None
        self._on_load.append(hook)
        return lambda: self._on_load.remove(hook) if hook in self._on_load else None

    @property
    def loaded(self):
        """The engine if it is loaded, else None (loads nothing)."""
        return self._engine


class QuailSession:
    """`execute(sql, dialect) -> pyarrow.Table`; `report` describes the last execution.

    `config`: what the session runs on and how (exec/config.SessionConfig; default: the CPU,
    no answer cache). `precision`: the precision `config`
    resolves to (`SessionConfig.answer_precision`, as open_session passes it), part of the
    answers' identity; empty where the engine's is not known (a test's fake engine). `text`:
    the PromptText prompts are tokenized through and answers are cached under (default: the
    engine's tokenizer and model id, which loads the engine); `model_config`: the model's
    config for the cost model without loading weights (default: the engine's). With both, a
    query whose answers are all cached loads no model. `display`: makes the progress display of
    one execution (the caller's, e.g. cli/progress.Progress), used when `config.progress`;
    exec/progress_sink.py says what it is told. `decoder`: (PromptText, engine factory[,
    config getter]) of another model that writes the text of generative operators (loaded on
    first use; its config, read without weights, sizes an aggregate's map chunk in the plan),
    None when this session's model writes it. `device_spec`: the cost model's device (default: probed
    from the device on first use).
    """

    def __init__(self, con, engine_factory: Callable[[], object],
                 config: SessionConfig | None = None, *, precision: str = "", text=None,
                 model_config: Callable[[], object] | None = None,
                 decoder: tuple | None = None,
                 display: Callable[[], object] | None = None, device_spec=None):
        self.con = con
        self.config = config if config is not None else SessionConfig(device="cpu",
                                                                       use_cache=False)
        self.device = self.config.engine_device
        self.precision = precision
        self.text = text if text is not None else PromptText.of_engine(lambda: self.engine)
        self._engine = _LazyEngine(engine_factory, lambda: getattr(self.text, "load_s", 0.0))
        self._model_config = model_config
        self.decoder_text, self._decoder, self._decoder_config = None, None, None
        if decoder is not None:
            self.decoder_text = decoder[0]
            self._decoder_config = decoder[2] if len(decoder) > 2 else None
            self._decoder = _LazyEngine(decoder[1],
                                        lambda: getattr(self.decoder_text, "load_s", 0.0))
        self.cache = AnswerCache.in_dir(self.config.answers_dir)
        self.display, self.device_spec = display, device_spec
        self.report = Report()
        self.parsed = None
        self._text_load0 = self._decoder_text_load0 = 0.0

    @property
    def engine(self):
        return self._engine.get()

    @property
    def decoder_engine(self):
        """The generation model's engine (loaded on first use)."""
        return self._decoder.get()

    def parse(self, sql: str, dialect: str):
        return parse(sql, dialect)

    def execute(self, sql: str, dialect: str = "duckdb") -> pa.Table:
        with relaxed_gc():  # millions of small acyclic objects: exec/gc_tuning.py
            return self._execute(sql, dialect)

    def _execute(self, sql: str, dialect: str) -> pa.Table:
        start = time.perf_counter()
        self._text_load0 = getattr(self.text, "load_s", 0.0)  # the text may be shared
        self._decoder_text_load0 = getattr(self.decoder_text, "load_s", 0.0)
        self.report = Report(device=self.device.name)
        with self.report.phase("parse"):
            parsed = self.parse(sql, dialect)
            if self.config.queries_only:  # other statements are refused
                parsed.check_query()
        self.parsed = parsed
        store = AnswerStore()
        progress = (self.display() if self.config.progress and self.display is not None
                    else NullProgress())
        progress.set_token_counter(self._fresh_tokens)
        runner = _SessionRunner(self, progress)
        suffix = f"_{uuid.uuid4().hex[:10]}"
        statement, limit = parsed.duckdb_sql, None
        if parsed.ai_ops:  # read once; the statements DuckDB runs are derived from this tree
            tree, limit = push_limit(read_statement(parsed))
            statement = emit(prepare(tree, suffix))
        lock = device_lock(self.device.name)
        udf_lock = StatementLock(lock)
        names = register_udfs(self.con, parsed.ai_ops, store, runner, udf_lock, suffix)
        tables: list[str] = []
        try:
            with self.report.phase("check"):
                self._check(statement)
            with self.report.phase("device_wait"):  # another statement or process has it
                lock.acquire()
            try:
                udf_lock.held_by_statement = True
                if self.config.plan and parsed.ai_ops:
                    self._run_cores(parsed, runner, store, suffix, limit)
            finally:
                udf_lock.held_by_statement = False
                lock.release()
            keyed = {op: m for op, m in store.keyed.items() if m is not None}
            if keyed:
                with self.report.phase("answer_keys"):
                    names += register_keyed_udfs(self.con, parsed.ai_ops, store, keyed,
                                                 self.report, suffix)
                    passes = register_pass_tables(self.con, parsed.ai_ops, store, keyed,
                                                  suffix)
                    tables += passes.values()
                    statement = emit(prepare(tree, suffix, frozenset(keyed), passes))
            with self.report.phase("statement"):
                table = statement_arrow(self.con, statement)
        except QuailError:
            raise
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # duckdb raises many types; a UDF error comes back wrapped
            raise statement_error(exc, parsed, "query failed: ") from exc
        finally:
            progress.close()
            unregister_udfs(self.con, names)
            unregister_pass_tables(self.con, tables)
            self.text.flush()
        self._finish(start, table.num_rows)
        return table

    def _run_cores(self, parsed, runner, store: AnswerStore, suffix: str, limit) -> None:
        unexpect = self._expect_grammars(parsed.ai_ops)
        specs = functools.cache(self._specs)
        try:
            for core in dependency_order(parsed.cores):
                CoreRunner(self.con, core.ops_of(parsed.ai_ops), runner, store, specs,
                           self.config.sample_size,
                           lambda rel: prepare_scan(rel, suffix, parsed.group_ops),
                           self.config.use_cache, self._writer_spec).run(core, limit,
                                                                         len(parsed.cores))
        finally:
            unexpect()

    def _expect_grammars(self, ops) -> Callable[[], None]:
        """Tell the engine that writes the plan's structured answers (the generation model's
        where the session has one) their grammars as soon as it is loaded, so that it builds
        them while the operators before them run and their prompts are prepared, not when
        their first prefill waits for them (LocalEngine.expect_grammars). A hint: an engine
        without it, or a grammar that cannot be built, is left to the operator's own call.
        -> what drops the hint if the statement ends without loading that engine."""
        grammars = []
        for op in ops:
            if op.op not in DECODED:
                continue
            try:
                grammar = task_grammar(op)
            except QuailError:
                continue  # (the operator reports it, with its SQL)
            if grammar is not None and grammar not in grammars:
                grammars.append(grammar)
        if not grammars:
            return lambda: None
        writer = self._decoder if self._decoder is not None else self._engine

        def expect(engine) -> None:
            hook = getattr(engine, "expect_grammars", None)
            if hook is not None:  # (on the engine thread, which owns the engine's state)
                engine_thread.submit(hook, grammars)
        return writer.when_loaded(expect)

    def close(self) -> None:
        self.cache.close()

    def _fresh_tokens(self) -> int:
        """The engines' token counter, read by the progress display; loads nothing. The
        generation model's counts too: the operators it writes are progress as well (they read
        as 0 tokens/s when only the session's model was counted)."""
        engines = {id(e): e for e in (self._engine.loaded,
                                      self._decoder.loaded if self._decoder else None) if e}
        return sum(e.stats.fresh_tokens for e in engines.values())

    def _check(self, statement: str) -> None:
        try:
            self.con.execute("EXPLAIN " + statement)
        except Exception as exc:  # noqa: BLE001 - binder/catalog/parser errors of DuckDB
            raise statement_error(exc, self.parsed) from None

    def _specs(self):
        found = _unloaded_config(self._engine, self._model_config, self.text)
        if found is None:  # (no config getter: the engine's own, loading it)
            engine = self.engine
            found = getattr(engine, "config", None), engine.model_id
        config, name = found
        spec = (ModelSpec.from_attrs(config, name=name) if config is not None
                else ModelSpec("unknown", 30, 576, 9, 3, 64, 1536, 49152))
        return spec, self._device_spec()

    def _writer_spec(self):
        """The cost model's view of the generation model when it is not the session's (its
        config, read without its weights), else None."""
        if self._decoder is None:
            return None  # (nor for a decoder given without its config: not loaded for a plan)
        found = _unloaded_config(self._decoder, self._decoder_config, self.decoder_text)
        if found is None or found[0] is None:
            return None
        return ModelSpec.from_attrs(found[0], name=found[1])

    def _device_spec(self):
        if self.device_spec is None:  # probed once per session: every figure uses the same
            # on a GPU this imports torch and starts CUDA (seconds): model load, not query work
            with self.report.phase("device_start"):
                self.device_spec = device_spec(self.device.kind, self.precision or "bf16")
        return self.device_spec

    def _speed_of_light(self, rep: Report, writer) -> None:
        """The report's speed-of-light seconds: each model's operators on its own shape (the
        generation model's `writer`, when loaded, wrote the decoded operators)."""
        spec, dev = self._specs() if self._engine.loaded is not None else (None, None)
        groups = [(spec, [o for o in rep.ops.values() if writer is None
                          or o.kind not in DECODED])]
        if writer is not None:
            config = getattr(writer, "config", None)
            wspec = (ModelSpec.from_attrs(config, name=writer.model_id) if config is not None
                     else spec)
            groups.append((wspec, [o for o in rep.ops.values() if o.kind in DECODED]))
            if dev is None:
                dev = self._device_spec()
        sheet = None
        if self.device.is_cuda:
            sheet = device_spec("cuda", self.precision or "bf16", datasheet=True)
        rep.sol_seconds = rep.sol_seconds_sustained = 0.0
        for model, ops in groups:
            if model is None or not ops:
                continue
            work = Work()
            for o in ops:
                work = work + o.work
            passes = num_passes(work.fresh_tokens)
            rep.sol_seconds_sustained += seconds(model, dev, work, passes)
            rep.sol_seconds += seconds(model, sheet or dev, work, passes)
        banded = self.precision.endswith("-band")
        rep.device = dev.name + ("+float32-band" if banded else "")
        if self.precision and self.precision != "fp32" and not banded and rep.ops:
            note = (f"answers at precision {self.precision} were not checked against float32 "
                    "(no re-ask band: infer/bands.json has none for this model and device, or "
                    "the precision was asked for); its close calls may differ from float32's")
            if note not in rep.remarks:
                rep.remarks.append(note)
        rep.model = self._engine.loaded.model_id if self._engine.loaded is not None else ""

    def _finish(self, start: float, rows: int) -> None:
        rep = self.report
        rep.wall_s = time.perf_counter() - start
        rep.rows = rows
        # model load = the weights (and the GPU's kernel warm-up) + the tokenizer + starting
        # the GPU (torch and CUDA, when the cost model first asks its name; on the CPU that
        # phase is the CPU probe, not a load), each as it happened here and counted once
        text_s = getattr(self.text, "load_s", 0.0) - self._text_load0
        start_s = rep.phases.get("device_start", 0.0) if self.device.is_cuda else 0.0
        tokenizer_s = max(0.0, text_s - self._engine.nested_s)
        rep.load_s = self._engine.load_s + tokenizer_s + start_s
        if self._engine.load_s:
            rep.load_phases = {"device_start_s": round(start_s, 3),
                               "tokenizer_s": round(tokenizer_s, 3),
                               "engine_s": round(self._engine.load_s, 3),
                               **getattr(self._engine.loaded, "load_phases", {})}
        self._engine.load_s = self._engine.nested_s = 0.0
        if self._decoder is not None:
            dec_text_s = getattr(self.decoder_text, "load_s", 0.0) - self._decoder_text_load0
            rep.load_s += self._decoder.load_s + max(0.0, dec_text_s - self._decoder.nested_s)
            self._decoder.load_s = self._decoder.nested_s = 0.0
            if any(o.prompts and o.kind in DECODED for o in rep.ops.values()):
                rep.generation_model = self.decoder_text.model_name
        writer = self._decoder.loaded if self._decoder is not None else None
        if rep.ops and (self._engine.loaded is not None or writer is not None):
            self._speed_of_light(rep, writer)
        for op_id, o in rep.ops.items():
            log.info("op %d %s: %d -> %d rows, %d fresh tokens", op_id, o.kind, o.rows_in,
                     o.rows_out, o.fresh_tokens)


def dependency_order(cores: Sequence) -> list:
    """`cores` with every core after the cores whose AI operators its scans call (a CTE's
    classification read by the outer query's join): their answers are then in the store when
    the scan reads them, so DuckDB never computes them row by row. Written order otherwise (and
    on a cycle)."""
    owner = {op: i for i, c in enumerate(cores)
             for op in (*c.filters, *c.joins, *c.projections)}
    needs = {i: {owner[k] for r in c.relations for k in r.calls()
                 if k in owner and owner[k] != i} for i, c in enumerate(cores)}
    order: list[int] = []
    while len(order) < len(cores):
        ready = [i for i in range(len(cores)) if i not in order and needs[i] <= set(order)]
        if not ready:  # a cycle: keep the written order for the rest
            order += [i for i in range(len(cores)) if i not in order]
            break
        order.append(ready[0])
    return [cores[i] for i in order]


def _unloaded_config(lazy, config_getter, text):
    """(config, name) of a model for the cost model without loading it: its loaded engine's,
    else its config read without weights (either may be None); None when neither is at hand."""
    engine = lazy.loaded
    if engine is not None:
        return getattr(engine, "config", None), engine.model_id
    if config_getter is not None:
        return config_getter(), text.identity
    return None


class _SessionRunner(OpRunner):
    """OpRunner bound to the session's lazily loaded engine and current report; with `writes`,
    to its generation model instead (the decoder the main runner hands generated text to)."""

    def __init__(self, session: QuailSession, progress, writes: bool = False):
        self._session, self._writes = session, writes
        super().__init__(None, session.cache, session.report, progress,
                         on_long=session.config.on_long, calibrate=session.config.calibrate,
                         batch_size=session.config.batch_size,
                         text=session.decoder_text if writes else session.text,
                         precision=session.precision)
        self.share_kv = session.config.share_kv
        # the planner's batching for the engine's device until a core's plan sets its own (the
        # same choice: plan/batching.for_spec), e.g. for the generation model's runner
        self.sizer.batching = batching.for_device(session.device.is_cuda)
        # likewise the plan's use of cached answers, for calls before a core's plan (its
        # samples) or outside one (a statement run as written)
        self.cached_answers = cached_answers_for(session.config.use_cache)
        if not writes and session.decoder_text is not None:
            self.decoder = _SessionRunner(session, progress, writes=True)

    @property
    def engine(self):
        return self._session.decoder_engine if self._writes else self._session.engine

    @engine.setter
    def engine(self, value) -> None:
        pass

    def loaded_engine(self):
        lazy = self._session._decoder if self._writes else self._session._engine
        return lazy.loaded if lazy is not None else None

    def answer_cap(self) -> int | None:
        """The loaded engine's cap, else the session's (the planner asks before any load)."""
        engine = self.loaded_engine()
        if engine is not None:
            return getattr(engine, "max_new_tokens", None)
        return self._session.config.max_new_tokens
