"""`quail query` under fire, on the embedded default model: SIGKILL at seeded random points (and
once just after the first answers are committed) and a re-run; two processes on one cache at
once. What a user would notice: a previous --output file survives a kill whole, the answer
cache and token store still open and hold the uninterrupted run's answers, a retry resumes
where the killed run stopped, and a second process waits (saying so once) and reuses the
first's answers instead of computing them again."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from quail_engine.exec.device_lock import device_lock
from quail_engine.exec.token_store import TokenStore
from quail_engine.settings import cache_root

pytestmark = pytest.mark.model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data" / "reviews.csv"
ROWS = 24
SQL = ("SELECT id, review FROM reviews WHERE ai_filter('Is this review positive? ' || review) "
       "ORDER BY id")
# two AI filters: the plan samples them first, so a run commits answers more than once (a
# filter alone asks its 24 rows in one batch)
KILL_SQL = ("SELECT id, review FROM reviews WHERE ai_filter('Is this review positive? ' || "
            "review) AND ai_filter('Does this review talk about the price? ' || review) "
            "ORDER BY id")
WAITING = "waiting for another quail process using cpu (pid {})"


class Quail:
    """`quail query` over the reviews with its own cache root (models and the CPU probe shared
    with the real cache, so nothing is converted or measured twice)."""

    def __init__(self, tmp: Path, name: str, data: Path):
        self.root = tmp / name
        self.root.mkdir()
        for kind in ("models", "probe"):
            (cache_root() / kind).mkdir(parents=True, exist_ok=True)
            (self.root / kind).symlink_to(cache_root() / kind, target_is_directory=True)
        self.data = data
        self.env = {**os.environ, "DO_NOT_TRACK": "1", "QUAIL_CACHE_DIR": str(self.root)}

    @property
    def answers(self) -> Path:
        return self.root / "answers" / "answers.sqlite"

    def start(self, out: Path, report: Path, stderr: Path, sql: str = SQL) -> subprocess.Popen:
        """`quail query` in float32: in bfloat16 a row's margin moves with the rows batched
        beside it (up to 0.1 logits; these prompts' closest margin is 0.005), so a retry that
        batches the rows no killed attempt answered differently could flip a near tie
        (bench/results/batch-sensitivity.md)."""
        with stderr.open("w") as err:
            return subprocess.Popen(
                [sys.executable, "-m", "quail_engine", "query", "-e", sql, "--table",
                 f"reviews={self.data}", "--device", "cpu", "--precision", "fp32", "--cache-dir",
                 str(self.root / "answers"), "--output", str(out), "--report", str(report)],
                env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)

    def cache(self) -> dict[str, str]:
        """Every cached answer, after checking the file opens and is whole."""
        if not self.answers.exists():
            return {}
        con = sqlite3.connect(f"file:{self.answers}?mode=ro", uri=True)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            tables = con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
            return dict(con.execute("SELECT key, value FROM answers")) if tables else {}
        finally:
            con.close()

    def cache_size(self) -> int:
        try:
            con = sqlite3.connect(f"file:{self.answers}?mode=ro", uri=True)
            try:
                return con.execute("SELECT count(*) FROM answers").fetchone()[0]
            finally:
                con.close()
        except sqlite3.Error:  # not created yet
            return 0

    def tokens(self) -> dict[tuple[str, bytes], list[int]]:
        """Every stored token id list by (store, text key), after opening each store as a
        query would (no segment may be unreadable)."""
        out = {}
        for store in sorted((self.root / "tokens").glob("*/*")):
            TokenStore(_no_encoder, store)
            for seg in store.glob("seg-*.arrow"):
                table = pa.ipc.open_file(pa.memory_map(str(seg))).read_all()
                for key, ids in zip(table.column("key").to_pylist(),
                                    table.column("ids").to_pylist()):
                    out[(store.name, key)] = ids
        return out


def _no_encoder(texts):
    raise AssertionError("opening a token store tokenized something")


@pytest.fixture
def data(tmp_path, require_embedded) -> Path:
    require_embedded("default")
    lines = EXAMPLES.read_text().splitlines()
    path = tmp_path / "reviews.csv"
    path.write_text("\n".join(lines[:ROWS + 1]) + "\n")
    return path


def _finish(proc: subprocess.Popen, stderr: Path) -> str:
    try:
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"quail query hung (deadlock?): {stderr.read_text()}")
    text = stderr.read_text()
    assert proc.returncode == 0, text
    return text


def _sentinel(out: Path, attempt: int) -> bytes:
    pq.write_table(pa.table({"previous_result": [attempt]}), out)
    return out.read_bytes()


def test_killed_query_keeps_output_and_caches_whole_and_its_retry_resumes(
        tmp_path, caplog, data):
    ref = Quail(tmp_path, "reference", data)
    start = time.perf_counter()
    _finish(ref.start(tmp_path / "ref.parquet", tmp_path / "ref.json", tmp_path / "ref.err",
                      KILL_SQL), tmp_path / "ref.err")
    ref_seconds = time.perf_counter() - start
    ref_rows = pq.read_table(tmp_path / "ref.parquet")
    ref_report = json.loads((tmp_path / "ref.json").read_text())
    ref_ops = ref_report["operators"]
    assert ref_report["device"] == "cpu-float32"  # see Quail.start
    ref_cache, ref_tokens = ref.cache(), ref.tokens()
    asked = len(ref_cache)
    assert 0 < ref_rows.num_rows < ROWS and sum(o["prompts"] for o in ref_ops) == asked > ROWS

    q = Quail(tmp_path, "killed", data)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out, report, err = out_dir / "result.parquet", tmp_path / "report.json", tmp_path / "err"

    def check_after(proc: subprocess.Popen, previous: bytes) -> int:
        """The state a killed (or finished) attempt leaves; the number of cached answers."""
        proc.wait(timeout=300)
        visible = sorted(p.name for p in out_dir.iterdir() if not p.name.startswith("."))
        assert visible == [out.name]  # no partial file beside it
        assert proc.returncode in (0, -9), err.read_text()
        if out.read_bytes() != previous:  # replaced whole: the run got that far
            assert pq.read_table(out).equals(ref_rows)
        cache = q.cache()
        assert {k: ref_cache.get(k) for k in cache} == cache  # the uninterrupted run's answers
        tokens = q.tokens()
        assert {k: ref_tokens.get(k) for k in tokens} == tokens
        return len(cache)

    # 1. killed right after its first answers are committed: the retry must not redo them
    previous = _sentinel(out, 0)
    proc = q.start(out, report, err, KILL_SQL)
    while q.cache_size() == 0 and proc.poll() is None:
        time.sleep(0.005)
    assert proc.poll() is None, f"finished before its first batch was seen: {err.read_text()}"
    proc.kill()
    counts = [check_after(proc, previous)]
    assert 0 < counts[0] < asked

    # 2. killed at seeded random points of a run (start-up, scans, model load, batches, output)
    rng = random.Random(13)
    for attempt in range(1, 4):
        previous = _sentinel(out, attempt)
        proc = q.start(out, report, err, KILL_SQL)
        time.sleep(rng.uniform(0.2, 0.9) * ref_seconds)
        proc.kill()
        counts.append(check_after(proc, previous))
    assert counts == sorted(counts)  # nothing committed is ever lost

    # 3. the retry computes only what no killed attempt committed, and answers as the reference;
    # a segment a killed writer left half-written is cleared away
    store = q.root / next((ref.root / "tokens").glob("*/head")).relative_to(ref.root)
    store.mkdir(parents=True, exist_ok=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = store / f".seg-{'0' * 32}.arrow.{dead}.tmp"
    stale.write_bytes(b"ARROW1\x00\x00half")
    before = q.cache_size()
    _finish(q.start(out, report, err, KILL_SQL), err)
    assert not stale.exists()
    ops = json.loads(report.read_text())["operators"]
    hits = sum(o["cache_hits"] for o in ops)
    assert hits == before > 0 and sum(o["prompts"] for o in ops) - hits < asked
    assert pq.read_table(out).equals(ref_rows)
    assert q.cache() == ref_cache
    assert not [r for r in caplog.records if r.levelname == "WARNING"]  # no unreadable segment


def test_two_processes_on_one_cache_wait_for_the_device_and_compute_once(
        tmp_path, monkeypatch, data):
    q = Quail(tmp_path, "shared", data)
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(q.root))
    runs = []
    # This test holds the device the way a running quail process does, so both processes
    # reach it while it is taken; then they compete for it with each other.
    with device_lock("cpu"):
        for name in ("a", "b"):
            err = tmp_path / f"{name}.err"
            runs.append((q.start(tmp_path / f"{name}.parquet", tmp_path / f"{name}.json", err),
                         name, err))
        deadline = time.monotonic() + 300
        while not all(WAITING.format(os.getpid()) in err.read_text() for _, _, err in runs):
            assert all(p.poll() is None for p, _, _ in runs), [e.read_text() for *_, e in runs]
            assert time.monotonic() < deadline, [e.read_text() for *_, e in runs]
            time.sleep(0.05)
    ops = {}
    for proc, name, err in runs:
        lines = _finish(proc, err).splitlines()
        assert lines.count(f"quail: {WAITING.format(os.getpid())}") == 1  # said once
        ops[name] = json.loads((tmp_path / f"{name}.json").read_text())["operators"][0]
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    first, second = sorted(ops.values(), key=lambda o: o["cache_hits"])
    assert first["cache_hits"] == 0 and first["fresh_tokens"] > 0
    assert second["cache_hits"] == second["prompts"] == ROWS and second["fresh_tokens"] == 0
    assert len(q.cache()) == ROWS
