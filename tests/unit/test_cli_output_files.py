"""`--output` / `--report`: a bad path or format is refused before any work starts, and a file is
replaced whole or not at all (a run killed mid-write leaves the previous file intact)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from quail_engine.cli import main
from quail_engine.cli.output import replacing, write_file

# The SQL reads a table nobody defined: a command that checked its paths after starting work
# would report the table instead of the path.
UNDEFINED = "SELECT * FROM nowhere"


@pytest.mark.parametrize(("args", "words"), [
    (["-o", "{tmp}/missing/out.parquet"], "--output '{tmp}/missing/out.parquet': folder"),
    (["-o", "{tmp}/out.txt"], "--output '{tmp}/out.txt': expected a .parquet, .csv or .jsonl"),
    (["-o", "{tmp}"], "--output '{tmp}'"),
    (["--report", "{tmp}/missing/report.json"], "--report '{tmp}/missing/report.json': folder"),
])
def test_bad_output_paths_are_refused_before_the_query_runs(tmp_path, capsys, args, words):
    args = [a.format(tmp=tmp_path) for a in args]
    assert main(["query", "-e", UNDEFINED, "-q", *args]) == 2
    err = capsys.readouterr().err
    assert words.format(tmp=tmp_path) in err and "nowhere" not in err


def test_explain_analyze_checks_its_report_path_first(tmp_path, capsys):
    assert main(["explain", "-e", UNDEFINED, "--analyze", "--report",
                 str(tmp_path / "missing" / "r.json")]) == 2
    assert "--report" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", ["parquet", "csv", "jsonl"])
def test_output_replaces_the_previous_file_and_leaves_no_temporary(tmp_path, capsys, suffix):
    out = tmp_path / f"out.{suffix}"
    out.write_text("previous")
    assert main(["query", "-e", "SELECT 1 AS a, ['x', 'y'] AS labels", "-q",
                 "-o", str(out)]) == 0
    assert out.read_bytes() != b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_csv_output_writes_list_columns_as_json(tmp_path):
    write_file(pa.table({"labels": [["a", "b"], None]}), str(tmp_path / "o.csv"))
    assert (tmp_path / "o.csv").read_text().splitlines() == ['"labels"', '"[""a"", ""b""]"', ""]


def test_a_failing_write_keeps_the_previous_file(tmp_path):
    out = tmp_path / "report.json"
    out.write_text("previous")
    with pytest.raises(RuntimeError), replacing(out) as temp:
        Path(temp).write_text("half")
        raise RuntimeError("stopped mid-write")
    assert out.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


_WRITER = """
import sys
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.compute as pc
from quail_engine.cli.output import write_file
n = int(sys.argv[2])
ids = pa.array(np.arange(n))
text = pc.binary_join_element_wise(pc.cast(ids, pa.string()), "some review text " * 2, " ")
table = pa.table({"id": ids, "review": text})
print("writing", flush=True)
write_file(table, sys.argv[1])
"""
_ROWS = {"parquet": 1_500_000, "csv": 400_000, "jsonl": 60_000}  # 14, 20 and 4 MB


def _bytes_in(folder: Path) -> int:
    """Bytes of the files in `folder` (a writer removes earlier writers' leftovers meanwhile)."""
    total = 0
    for entry in os.scandir(folder):
        try:
            total += entry.stat().st_size
        except FileNotFoundError:
            pass
    return total


def _kill_once_written(folder: Path, target: Path, rows: int, threshold: int) -> int:
    """Start a writer replacing `target`, SIGKILL it once `threshold` new bytes are on disk;
    its return code (-9 when killed before finishing)."""
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(target), str(rows)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    before = target.stat().st_size
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:
        if _bytes_in(folder) - before >= threshold:
            child.send_signal(signal.SIGKILL)
            break
    return child.wait()


@pytest.mark.parametrize("suffix", ["parquet", "csv", "jsonl"])
def test_sigkill_mid_write_leaves_the_previous_file_intact(tmp_path, suffix):
    target = tmp_path / f"out.{suffix}"
    write_file(pa.table({"id": [1, 2, 3], "review": ["a", "b", "c"]}), str(target))
    previous = target.read_bytes()
    killed = 0
    for threshold in (1, 1 << 20, 3 << 20):
        code = _kill_once_written(tmp_path, target, _ROWS[suffix], threshold)
        killed += code == -signal.SIGKILL
        assert target.read_bytes() == previous, f"killed at {threshold} bytes: file changed"
        leftovers = [p.name for p in tmp_path.iterdir() if p != target]
        assert all(n.startswith(f".{target.name}.") for n in leftovers), leftovers
    assert killed == 3, "every writer was killed before it finished"


def test_a_killed_writers_temporary_files_are_removed_by_the_next_write(tmp_path):
    """SIGKILL skips the writer's cleanup; the next write of the same file removes what a dead
    writer left, and leaves alone the file of a writer that is still running."""
    import os
    import subprocess
    import sys

    out = tmp_path / "out.parquet"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        left = tmp_path / f".out.parquet.{dead}.0badf00d.tmp"
        older = tmp_path / ".out.parquet.1234abcd.tmp"  # before writers named their pid
        running = tmp_path / f".out.parquet.{live.pid}.feedbeef.tmp"
        other = tmp_path / f".other.parquet.{dead}.0badf00d.tmp"
        for path in (left, older, running, other):
            path.write_bytes(b"partial")
        write_file(pa.table({"x": [1]}), str(out))
        assert not left.exists() and not older.exists()
        assert running.exists() and other.exists()
        assert pq.read_table(out).column("x").to_pylist() == [1]
        assert os.path.exists(out)
    finally:
        live.kill()
        live.wait()


REPEATED = "SELECT 1 AS id, 2 AS id, 3 AS id_1, 4 AS ID"  # e.g. SELECT r.id, t.id FROM r JOIN t


def test_repeated_column_names_are_made_unique_as_duckdb_names_them(tmp_path, capsys):
    """A result whose columns repeat a name (`SELECT r.id, t.id`) keeps every column in every
    output, named as DuckDB's own COPY names them: JSON lines kept one value per key, the
    text table failed with an internal error, and Parquet readers refused the file."""
    import duckdb

    copy = tmp_path / "duckdb.json"
    duckdb.connect().execute(f"COPY ({REPEATED}) TO '{copy}'")
    want = copy.read_text().strip()
    assert main(["query", "-e", REPEATED, "--format", "json"]) == 0
    assert capsys.readouterr().out.replace(" ", "").strip() == want
    assert main(["query", "-e", REPEATED]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert [c.strip() for c in head.split("|")] == ["id", "id_1", "id_1_1", "ID_2"]
    out = tmp_path / "out.parquet"
    assert main(["query", "-e", REPEATED, "-o", str(out), "-q"]) == 0
    assert pq.read_table(out).to_pylist() == [{"id": 1, "id_1": 2, "id_1_1": 3, "ID_2": 4}]
