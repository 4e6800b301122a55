"""The session tells the engine that writes a plan's structured answers their grammars once it
is loaded, before their first prompt is asked (so it builds them meanwhile); free text tells it
nothing, and an engine never loaded (every answer cached) is told nothing."""

from __future__ import annotations

import json

import duckdb
from exec_fakes import FakeEngine

from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

TOY = DeviceSpec("toy", 1e11, 2e10)
SCHEMA = "{'type': 'object', 'properties': {'topic': {'type': 'string'}}}"


class ExpectingEngine(FakeEngine):
    def __init__(self):
        super().__init__()
        self.events: list = []

    def expect_grammars(self, grammars):
        self.events.append(("expect", [json.loads(g.source) for g in grammars]))

    def run(self, requests):
        self.events.append(("run", [r.readout.grammar is not None for r in requests]))
        return super().run(requests)


def _session(engine):
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, review VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(1, "great price"), (2, "slow delivery")])
    return QuailSession(con, lambda: engine, device_spec=TOY)


STRUCTURED = (f"SELECT id, AI_COMPLETE('m', PROMPT('Topic of {{0}}', review), "
              f"response_format => {{'type': 'json', 'schema': {SCHEMA}}}) AS s FROM t")


def test_structured_answers_are_expected_before_their_first_prompt():
    engine = ExpectingEngine()
    _session(engine).execute(STRUCTURED, "snowflake")
    expects = [e for e in engine.events if e[0] == "expect"]
    assert len(expects) == 1
    assert expects[0][1][0]["properties"] == {"topic": {"type": "string"}}
    first_structured = next(i for i, e in enumerate(engine.events)
                            if e[0] == "run" and any(e[1]))
    assert engine.events.index(expects[0]) < first_structured


def test_free_text_expects_nothing():
    engine = ExpectingEngine()
    _session(engine).execute("SELECT id, AI_COMPLETE('m', review) AS s FROM t", "snowflake")
    assert [e for e in engine.events if e[0] == "run"]
    assert not [e for e in engine.events if e[0] == "expect"]


def test_a_hook_waits_for_the_load_and_an_unloaded_engine_runs_none():
    """when_loaded: a query whose answers are all cached never loads the engine, so nothing
    is built for it; once loaded, a hook runs at once, and a waiting one ran with the load."""
    from quail_engine.exec.session import _LazyEngine

    seen = []
    lazy = _LazyEngine(ExpectingEngine)
    lazy.when_loaded(seen.append)
    assert seen == [] and lazy.loaded is None
    engine = lazy.get()
    assert seen == [engine]
    lazy.get()
    lazy.when_loaded(seen.append)
    assert seen == [engine, engine]


def test_a_statement_that_loads_no_engine_leaves_no_hook_behind():
    """Every answer cached: the statement's hint is dropped with it, so a later statement's
    load does not build grammars nobody asked for."""
    from quail_engine.exec.session import _LazyEngine

    seen = []
    lazy = _LazyEngine(ExpectingEngine)
    drop = lazy.when_loaded(seen.append)
    drop()
    drop()  # (twice: nothing left to drop)
    lazy.get()
    assert seen == []
