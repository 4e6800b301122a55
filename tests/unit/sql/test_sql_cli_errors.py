"""What `quail` prints when the input is bad or quail itself fails: one line, exit 2 for the
user's error, exit 3 for an internal error (traceback only with -v); SQL files that are not
UTF-8 are named with the byte offset."""

import sys

from quail_engine.cli import main


def test_user_error_is_one_line_exit_2(capsys):
    assert main(["explain", "-e", "SELECT ai_filter(review, temperature := [NULL]) FROM t"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("quail explain: error: AI_FILTER: option")


def test_internal_error_is_one_line_exit_3(monkeypatch, capsys):
    module = sys.modules["quail_engine.sql.query"]

    def broken(sql, dialect):
        raise KeyError("boom")

    monkeypatch.setattr(module, "parse", broken)
    assert main(["explain", "-e", "SELECT 1"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "internal error: KeyError: 'boom'" in err and "report" in err and "-v" in err
    assert main(["-v", "explain", "-e", "SELECT 1"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_sql_file_that_is_not_utf8(tmp_path, capsys):
    path = tmp_path / "latin1.sql"
    path.write_bytes("SELECT ai_filter('café') FROM t".encode("latin-1"))
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"SQL file {path} is not UTF-8: byte 0xe9 at offset 21 (line 1)" in err


def test_utf8_file_with_a_byte_order_mark(tmp_path, capsys):
    path = tmp_path / "bom.sql"
    path.write_bytes("\ufeffSELECT ai_filter('café') FROM t".encode())
    assert main(["explain", str(path)]) == 0
    assert "café" in capsys.readouterr().out


def test_undecodable_bytes_in_dash_e(capsys):
    import os

    assert main(["explain", "-e", os.fsdecode(b"SELECT ai_filter('caf\xe9') FROM t")]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_unreadable_sql_file(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    path = tmp_path / "locked.sql"
    path.write_text("SELECT 1")

    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    assert main(["explain", str(path)]) == 2
    assert f"cannot read SQL file {path}: Permission denied" in capsys.readouterr().err
