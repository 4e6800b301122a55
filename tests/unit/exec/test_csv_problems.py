"""A CSV's own problems are named with the file (not as a missing column of the query), and a
table with a header and no rows is answered without resolving or loading a model."""

from __future__ import annotations

import pytest

from quail_engine.cli import main

SQL = "SELECT id FROM t WHERE ai_filter(PROMPT('Is this positive? {0}', review))"


def _query(path, *extra: str) -> list[str]:
    return ["query", "-e", SQL, "--dialect", "duckdb", "--table", f"t={path}", "--no-cache",
            "--quiet", "--format", "csv", *extra]


@pytest.mark.parametrize(("text", "words"), [
    ("id,review\n1,good\n2,bad,extra,cols\n3\n",
     "line 3 has 4 fields where the header has 2 ('2,bad,extra,cols')"),
    ("", "the file is empty"),
])
def test_a_broken_csv_is_named_with_its_problem(text, words, tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text(text)
    assert main(_query(path)) == 2
    err = capsys.readouterr().err
    assert f"cannot read '{path}': {words}" in err and "Binder Error" not in err


def test_a_header_only_csv_is_answered_without_a_model(tmp_path, capsys, monkeypatch):
    from quail_engine.infer import model_ref

    def no_model(spec):
        raise AssertionError(f"the model {spec!r} was resolved for a table without rows")

    monkeypatch.setattr(model_ref.ModelRef, "resolve", classmethod(lambda cls, spec:
                                                                   no_model(spec)))
    path = tmp_path / "t.csv"
    path.write_text("id,review\n")
    assert main(_query(path)) == 0, capsys.readouterr().err
    assert [c.strip('"') for c in capsys.readouterr().out.split()] == ["id"]
