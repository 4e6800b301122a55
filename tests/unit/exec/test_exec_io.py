"""Inputs and outputs around a session: tables from files, the CLI, long documents,
the report's JSON fields."""

import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from exec_fakes import FakeEngine, bfilter, classify, filters_query, patch_fake_model

from quail_engine.cli import main
from quail_engine.errors import ExecutionError
from quail_engine.exec.config import SessionConfig
from quail_engine.exec.session import QuailSession
from quail_engine.exec.tables import register_table
from quail_engine.infer.api import GenerateReadout
from quail_engine.plan.cost import DeviceSpec

ROWS = [{"id": 1, "review": "great PRICE, price fine"}, {"id": 2, "review": "meh"}]


def write_inputs(tmp_path):
    table = pa.Table.from_pylist(ROWS)
    pq.write_table(table, tmp_path / "r.parquet")
    (tmp_path / "r.csv").write_text("id,review\n1,great PRICE price fine\n2,meh\n")
    with pa.ipc.new_file(str(tmp_path / "r.arrow"), table.schema) as w:
        w.write_table(table)
    db = duckdb.connect(str(tmp_path / "r.duckdb"))
    db.execute("CREATE TABLE r AS SELECT * FROM (VALUES (1, 'a'), (2, 'b')) t(id, review)")
    db.close()


@pytest.mark.parametrize("suffix", ["parquet", "csv", "arrow", "duckdb"])
def test_tables_from_files(tmp_path, suffix):
    write_inputs(tmp_path)
    con = duckdb.connect()
    register_table(con, "r", tmp_path / f"r.{suffix}")
    assert con.execute("SELECT count(*) FROM r").fetchone()[0] == 2


def test_missing_table_file_is_a_clear_error(tmp_path):
    with pytest.raises(ExecutionError, match="does not exist"):
        register_table(duckdb.connect(), "r", tmp_path / "nope.parquet")


def test_cli_query_prints_table_and_writes_report(tmp_path, monkeypatch, capsys):
    write_inputs(tmp_path)
    patch_fake_model(monkeypatch)
    out = tmp_path / "out.parquet"
    rc = main(["query", "-e", "SELECT id FROM r WHERE ai_filter('Is PRICE ok? ' || review)",
               "--table", f"r={tmp_path / 'r.parquet'}", "--report", str(tmp_path / "rep.json"),
               "--cache-dir", str(tmp_path / "cache"), "--quiet", "--output", str(out)])
    assert rc == 0
    assert pq.read_table(out).to_pylist() == [{"id": 1}]
    rep = json.loads((tmp_path / "rep.json").read_text())
    op = rep["operators"][0]
    for key in ("op", "rows_in", "rows_out", "selectivity_est", "selectivity_observed",
                "fresh_tokens", "requested_tokens", "est_seconds", "seconds"):
        assert key in op
    for key in ("wall_s", "fresh_tokens", "requested_tokens", "sol_seconds", "cache_hits"):
        assert key in rep
    assert rep["fresh_tokens"] > 0 and rep["sol_seconds"] > 0
    rc = main(["query", "-e", "SELECT nope FROM r", "--table", f"r={tmp_path / 'r.csv'}",
               "--quiet", "--no-cache"])
    assert rc == 2 and "nope" in capsys.readouterr().err


def test_cli_fp8_on_cpu_is_refused_before_any_answer(tmp_path, capsys):
    (tmp_path / "r.csv").write_text("id,review\n1,fine\n")
    rc = main(["query", "-e", "SELECT id FROM r WHERE ai_filter('Is it ok? ' || review)",
               "--table", f"r={tmp_path / 'r.csv'}", "--device", "cpu", "--precision", "fp8",
               "--quiet", "--no-cache"])
    err = capsys.readouterr().err
    assert rc == 2 and "precision 'fp8' runs only on the GPU path" in err and "cpu" in err


class TinyContext(FakeEngine):
    max_context = 40


@pytest.mark.parametrize("on_long", ["truncate", "error"])
def test_long_document_truncated_and_counted_or_refused(on_long):
    con = duckdb.connect()
    con.execute("CREATE TABLE reviews (id INTEGER, review VARCHAR)")
    con.execute("INSERT INTO reviews VALUES (1, ?), (2, 'short PRICE price')",
                [" ".join(f"w{i}" for i in range(200)) + " PRICE price"])
    parsed = filters_query((bfilter("Mentions PRICE?"), classify()), where=(0,), project=(1,))
    s = QuailSession(con, TinyContext,
                     SessionConfig(use_cache=False, on_long=on_long, device="cpu"),
                     device_spec=DeviceSpec("toy", 1e11, 1e10))
    s.parse = lambda sql, dialect: parsed
    if on_long == "error":
        with pytest.raises(ExecutionError, match="exceeds the model's context"):
            s.execute(parsed.duckdb_sql)
        return
    rows = s.execute(parsed.duckdb_sql).to_pylist()
    assert [r["id"] for r in rows] == [2]  # the long review lost its end (and its PRICE)
    assert s.report.truncated >= 1


class SeenGenerations(TinyContext):
    """TinyContext keeping each generation request's prompt length and max_tokens."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[int, int]] = []

    def run(self, requests):
        self.seen += [(len(r.tokens), r.readout.max_tokens) for r in requests
                      if isinstance(r.readout, GenerateReadout)]
        return super().run(requests)


@pytest.mark.parametrize("dialect,call", [
    ("snowflake", "AI_COMPLETE('m', review, {'max_tokens': 8192})"),
    ("bigquery", "AI.GENERATE(review, model_params => JSON "
                 "'{\"generation_config\": {\"max_output_tokens\": 8192}}').result"),
])
def test_max_tokens_past_the_context_gets_what_the_context_leaves(dialect, call, caplog):
    """The vendors' largest max_tokens (8192) with a short prompt: each row answered within the
    tokens its prompt leaves in the context, one warning naming the limit, no prompt cut."""
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT * FROM (VALUES (1, 'great price'), "
                "(2, 'the price was fair for what it is')) t(id, review)")
    engine = SeenGenerations()
    s = QuailSession(con, lambda: engine, SessionConfig(use_cache=False, device="cpu"),
                     device_spec=DeviceSpec("toy", 1e11, 1e10))
    with caplog.at_level("WARNING", logger="quail_engine.exec.batch_pipeline"):
        values = s.execute(f"SELECT id, {call} AS v FROM r ORDER BY id", dialect).column(
            "v").to_pylist()
    assert all(v.startswith("about ") for v in values)
    assert sorted(engine.seen) == sorted((n, TinyContext.max_context - n) for n, _ in engine.seen)
    assert len({n for n, _ in engine.seen}) == 2 and s.report.truncated == 0
    warned = [r.getMessage() for r in caplog.records if "requested output tokens" in r.getMessage()]
    assert len(warned) == 1 and "8192 requested output tokens" in warned[0]
    assert "context of 'fake' (40 tokens)" in warned[0]
