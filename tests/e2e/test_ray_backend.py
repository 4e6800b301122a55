"""The Ray backend (quail_engine/replicas) on a local Ray cluster of 2 CPUs and 2 workers, each
with a replica of the embedded default model: filters, joins and classifications return exactly the
rows the single-process engine returns, a worker that dies mid-query is survived, a query
without --workers never imports Ray, and an unreachable cluster is a one-line error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import ray

from quail_engine.exec.session import QuailSession

pytestmark = pytest.mark.model

DATA = Path(__file__).resolve().parents[1] / "data" / "reviews_labelled.jsonl"
POS = "Is this review positive? "
KINDS = ("filter", "two_filters", "join", "classify")


def query(kind: str, n: int) -> str:
    """The `kind` query over the first `n` reviews (a join: the first n/2, times 3 topics)."""
    return {
        "filter": f"SELECT id FROM reviews WHERE id < {n} AND ai_filter('{POS}' || review) "
                  "ORDER BY id",
        "two_filters": f"SELECT id FROM reviews WHERE id < {n} AND ai_filter('{POS}' || review) "
                       "AND ai_filter('Does this review talk about food? ' || review) ORDER BY id",
        "join": "SELECT r.id, t.topic FROM reviews r JOIN topics t ON ai_filter("
                "'Is the review ' || r.review || ' about ' || t.topic || '?') "
                f"WHERE r.id < {n // 2} ORDER BY r.id, t.topic",
        "classify": "SELECT id, ai_classify(review, ['positive', 'negative']) AS label "
                    f"FROM reviews WHERE id < {n} ORDER BY id",
    }[kind]


FLOAT32 = {"dtype": "float32"}  # as the single-process `engine` fixture (tests/e2e/conftest.py)


@pytest.fixture(scope="module")
def cluster():
    from quail_engine.replicas.cluster import LOCAL_SYSTEM_CONFIG

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 2**20,
             log_to_driver=False, _system_config=LOCAL_SYSTEM_CONFIG)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def con():
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    reviews = [r["text"] for r in rows if r["kind"] == "review"]
    c = duckdb.connect()
    for name, table in (("reviews", pa.table({"id": list(range(len(reviews))),
                                              "review": reviews})),
                        ("topics", pa.table({"topic": ["food", "a film", "a household item"]}))):
        c.register(f"{name}_arrow", table)
        c.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_arrow")
    return c


def rows(con, engine, sql):
    session = QuailSession(con.cursor(), lambda: engine)
    return session.execute(sql).to_pylist(), session.report


@pytest.fixture(scope="module")
def single(con, engine):
    """Rows of a query on the single-process engine (each query run once per module)."""
    memo: dict[str, list] = {}

    def get(sql):
        if sql not in memo:
            memo[sql] = rows(con, engine, sql)[0]
        return memo[sql]
    return get


@pytest.fixture(scope="module")
def workers(cluster):
    from quail_engine.replicas.ray_engine import RayEngine

    dist = RayEngine.start("default", "cpu", workers=2, engine_kwargs=FLOAT32)
    yield dist
    dist.close()


@pytest.mark.parametrize("kind", KINDS)
def test_two_workers_return_the_single_process_rows(con, single, workers, kind):
    before = dict(workers.worker_tokens)
    got, report = rows(con, workers, query(kind, 12))
    assert got == single(query(kind, 12)) and got
    busy = [w for w, n in workers.worker_tokens.items() if n > before.get(w, 0)]
    assert len(busy) == 2, f"{kind}: only workers {busy} got work"
    assert report.fresh_tokens > 0


def test_a_worker_that_dies_mid_query_is_survived(con, single, workers, monkeypatch):
    """(Last of the module's tests on `workers`: it leaves one worker.)"""
    monkeypatch.setenv("QUAIL_RAY_TEST_CRASH_WORKER", "1")  # exits on its next shard
    got, _ = rows(con, workers, query("join", 12))  # no answer cache: computed again
    assert got == single(query("join", 12))
    assert workers.num_workers == 1 and workers.failures == 1


def test_a_plain_query_never_imports_ray(tmp_path):
    (tmp_path / "r.csv").write_text("id,review\n1,I love it\n")
    code = (
        "import sys; from quail_engine.cli import main; "
        f"rc = main(['query', '-q', '--no-cache', '--device', 'cpu', '-t', "
        f"'r={tmp_path / 'r.csv'}', '-e', \"SELECT id FROM r WHERE ai_filter('{POS}' || "
        "review)\", '--output', '" + str(tmp_path / "o.csv") + "']); "
        "assert rc == 0, rc; print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "DO_NOT_TRACK": "1"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_an_unreachable_cluster_is_a_one_line_error(tmp_path):
    (tmp_path / "r.csv").write_text("id,review\n1,I love it\n")
    out = subprocess.run(
        [sys.executable, "-m", "quail_engine", "query", "-q", "--no-cache", "--device", "cpu",
         "--ray-address", "127.0.0.1:1", "-t", f"r={tmp_path / 'r.csv'}", "-e",
         f"SELECT id FROM r WHERE ai_filter('{POS}' || review)"],
        capture_output=True, text=True, env={**os.environ, "DO_NOT_TRACK": "1"}, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if "Ray cluster" in ln]
    assert lines and "cannot reach the Ray cluster at '127.0.0.1:1'" in lines[0], out.stderr
    assert "Traceback" not in out.stderr
