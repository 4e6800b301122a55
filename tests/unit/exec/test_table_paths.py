"""`--table NAME=PATH` reads that one file, literally (`rev[12].csv` is a file name, not a
pattern); `glob:` asks for a pattern. A file that cannot be read is one line naming it."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from quail_engine.cli import main


def write_csv(path, *ids):
    path.write_text("id,review\n" + "".join(f"{i},text {i}\n" for i in ids))
    return path


def query_ids(capsys, *table_args) -> list[int]:
    args = ["query", "-e", "SELECT id FROM t ORDER BY id", "-q", "-f", "csv"]
    for spec in table_args:
        args += ["--table", spec]
    assert main(args) == 0, capsys.readouterr().err
    return [int(v) for v in capsys.readouterr().out.split()[1:]]


def query_error(capsys, *table_args) -> str:
    args = ["query", "-e", "SELECT * FROM t", "-q"]
    for spec in table_args:
        args += ["--table", spec]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("name", ["rev[12].csv", "rev*.csv", "rev?.csv", "r[1]/x*.csv"])
def test_a_path_with_glob_characters_is_that_one_file(tmp_path, capsys, name):
    write_csv(tmp_path / "rev1.csv", 1)
    write_csv(tmp_path / "rev2.csv", 2)
    (tmp_path / "r[1]").mkdir()
    write_csv(tmp_path / "r[1]" / "xy.csv", 3)
    write_csv(tmp_path / name, 99)
    assert query_ids(capsys, f"t={tmp_path / name}") == [99]


def test_a_missing_path_with_glob_characters_is_missing(tmp_path, capsys):
    write_csv(tmp_path / "rev1.csv", 1)
    err = query_error(capsys, f"t={tmp_path / 'rev[12].csv'}")
    assert err.strip() == (f"quail query: error: table 't': file "
                           f"{str(tmp_path / 'rev[12].csv')!r} does not exist")


def test_glob_prefix_reads_every_matching_file(tmp_path, capsys):
    write_csv(tmp_path / "rev1.csv", 1)
    write_csv(tmp_path / "rev2.csv", 2)
    write_csv(tmp_path / "other.csv", 3)
    assert query_ids(capsys, f"t=glob:{tmp_path / 'rev*.csv'}") == [1, 2]
    err = query_error(capsys, f"t=glob:{tmp_path / 'none*.csv'}")
    assert "no file matches glob" in err and "none*.csv" in err


def test_table_help_documents_glob(capsys):
    with pytest.raises(SystemExit):
        main(["query", "--help"])
    assert "glob:data/*.csv" in capsys.readouterr().out


def test_non_utf8_csv_is_one_line_naming_the_file(tmp_path, capsys):
    (tmp_path / "latin.csv").write_bytes(b"id,review\n1,caf\xe9\n")
    err = query_error(capsys, f"t={tmp_path / 'latin.csv'}")
    assert len(err.strip().splitlines()) == 1
    assert "latin.csv" in err and "not UTF-8" in err


def test_non_utf8_byte_past_the_sniffed_rows_names_the_file(tmp_path, capsys):
    rows = b"".join(f"{i},fine text\n".encode() for i in range(30_000))
    (tmp_path / "deep.csv").write_bytes(b"id,review\n" + rows + b"30001,caf\xe9\n")
    assert main(["query", "-e", "SELECT max(review) FROM t", "-q",
                 "--table", f"t={tmp_path / 'deep.csv'}"]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert "deep.csv" in first and "line 30002 is not UTF-8" in first


def _parquet_bytes(tmp_path) -> bytes:
    pq.write_table(pa.table({"id": list(range(50_000))}), tmp_path / "good.parquet")
    return (tmp_path / "good.parquet").read_bytes()


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_broken_parquet_is_one_line_naming_the_file(tmp_path, capsys, damage):
    data = _parquet_bytes(tmp_path)
    broken = data[: len(data) // 2] if damage == "truncated" else b"not parquet at all" * 10
    (tmp_path / "broken.parquet").write_bytes(broken)
    err = query_error(capsys, f"t={tmp_path / 'broken.parquet'}")
    assert len(err.strip().splitlines()) == 1
    assert "broken.parquet" in err and "not a Parquet file, or truncated" in err


@pytest.mark.parametrize(("name", "words"), [
    ("bad.arrow", "not an Arrow IPC file"), ("bad.duckdb", "cannot open it"),
    ("bad.json", "malformed JSON")])
def test_other_unreadable_files_are_one_line(tmp_path, capsys, name, words):
    (tmp_path / name).write_bytes(b"\x00\x01 this is not that format \xff" * 40)
    err = query_error(capsys, f"t={tmp_path / name}")
    assert len(err.strip().splitlines()) == 1
    assert name in err and words in err


def test_a_folder_is_not_a_table_file(tmp_path, capsys):
    (tmp_path / "data.csv").mkdir()
    assert "is a folder, not a file" in query_error(capsys, f"t={tmp_path / 'data.csv'}")


def test_a_bad_byte_met_while_scanning_for_an_ai_filter_names_the_file(tmp_path, capsys):
    rows = b"".join(f"{i},fine text\n".encode() for i in range(30_000))
    (tmp_path / "deep.csv").write_bytes(b"id,review\n" + rows + b"30001,caf\xe9\n")
    assert main(["query", "-e", "SELECT id FROM t WHERE ai_filter('Is {0} good?', review)", "-q",
                 "--table", f"t={tmp_path / 'deep.csv'}", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"quail query: error: cannot read {str(tmp_path / 'deep.csv')!r}: line 30002 is not "
        "UTF-8 text (re-encode the file as UTF-8)"]
