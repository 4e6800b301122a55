"""`quail migrate` on the integration projects written for it (integration_tests/migrate_*):
every AI call listed with its status, `--write` then a green `dbt build` on `type: quail`, a
second `--write` that changes nothing, and bad input as one line, exit 2, nothing written.

dbt compiles each project in a child process (~5 s); the one `dbt build` runs the embedded model
on the smallest project (BigQuery, four tickets)."""

import shutil
from pathlib import Path

import pytest
from dbt_subprocess import run

from quail_engine.cli import main
from quail_engine.settings import cache_root

pytestmark = [pytest.mark.dbt]

ROOT = Path(__file__).resolve().parents[2] / "integration_tests"


def _copy(name: str, dest: Path) -> Path:
    target = dest / name
    shutil.copytree(ROOT / name, target, ignore=shutil.ignore_patterns("target", "logs"))
    return target


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _migrate(capsys, *args: str) -> tuple[int, list[str], str]:
    code = main(["migrate", "--quiet", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _rows(lines: list[str]) -> list[tuple[str, ...]]:
    """(node, function, IR operator, status) of each table row."""
    rows = []
    for line in lines[1:]:
        cells = line.split()
        if len(cells) < 4 or line.startswith(tuple("0123456789")):
            break
        status = "does not compile" if "does not compile" in line else (
            "moves unchanged" if "moves unchanged" in line else
            "moves, differs" if "moves, differs" in line else "refused")
        rows.append((cells[0], cells[1], cells[2], status))
    return rows


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("migrate")


def test_snowflake_project_every_call_and_a_model_that_does_not_compile(workdir, capsys):
    root = _copy("migrate_snowflake", workdir)
    (root / "models" / "warehouse_only.sql").write_text(
        "select {{ snowflake_only_macro() }} as x\n")
    before = _files(root)
    code, lines, _ = _migrate(capsys, root)
    assert sorted(_rows(lines)) == [
        ("delivery_complaints", "AI_FILTER", "ai_filter", "moves unchanged"),
        ("review_aspects", "AI_SENTIMENT", "ai_classify", "moves unchanged"),
        ("review_replies", "AI_COMPLETE", "ai_generate", "moves, differs"),
        ("review_topics", "AI_CLASSIFY", "ai_classify", "moves unchanged"),
        ("warehouse_only", "-", "-", "does not compile"),
    ]
    text = "\n".join(lines)
    assert "0 are refused" in text  # (AI_SENTIMENT with aspect categories runs)
    assert "'snowflake_only_macro' is undefined" in text
    assert "names the model 'llama3.1-8b'" in text
    assert "(snowflake, detected from" in lines[-1]
    assert code == 1
    assert _files(root) == before  # no target/, no logs/: dbt compiled in a scratch folder


def test_databricks_dialect_detected_from_its_profile(capsys):
    before = _files(ROOT / "migrate_databricks")
    code, lines, _ = _migrate(capsys, ROOT / "migrate_databricks")
    assert _rows(lines) == [
        ("review_labels", "ai_classify", "ai_classify", "moves unchanged"),
        ("review_labels", "ai_summarize", "ai_generate", "moves, differs"),
        ("review_labels", "ai_parse_document", "-", "refused"),
        ("review_labels", "ai_query", "ai_filter", "moves, differs"),
    ]
    assert "(databricks, detected from" in lines[-1]
    assert code == 1
    assert _files(ROOT / "migrate_databricks") == before


@pytest.mark.model
def test_bigquery_write_twice_then_dbt_build_is_green(workdir, capsys, require_embedded,
                                                      monkeypatch):
    require_embedded("default")
    require_embedded("smollm2-135m")  # writes the generated titles
    root = _copy("migrate_bigquery", workdir)
    code, lines, _ = _migrate(capsys, root, "--write")
    assert sorted(_rows(lines)) == [
        ("ticket_teams", "AI.CLASSIFY", "ai_classify", "moves unchanged"),
        ("ticket_titles", "AI.GENERATE", "ai_generate", "moves, differs"),
        ("urgent_tickets", "AI.IF", "ai_filter", "moves unchanged"),
        ("urgent_tickets", "AI.SCORE", "ai_score", "moves, differs"),
    ]
    assert code == 0
    assert "changed dbt_project.yml: added +quail_dialect: bigquery under models: support:" in lines
    assert any(ln.startswith("changed profiles.yml: added the output 'quail'") for ln in lines)
    written = _files(root)
    assert b"    dev:\n      type: bigquery" in written["profiles.yml"]  # theirs stays

    # the written profile keeps the default answer cache: answers start empty here (the
    # converted models are shared, not converted again)
    cache = workdir / "quail_cache"
    (cache_root() / "models").mkdir(parents=True, exist_ok=True)
    cache.mkdir()
    (cache / "models").symlink_to(cache_root() / "models")
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(cache))
    done = run(root, "build", "--target", "quail")
    assert "Completed successfully" in done.stdout, done.stdout
    assert "PASS=4" in done.stdout  # the seed and three AI models
    assert " 0 from cache" in done.stdout and "4 prompts run" in done.stdout

    # again, with the cost estimate on the tables the build wrote
    code, lines, _ = _migrate(capsys, root, "--write", "--data", root / "target" / "quail.duckdb",
                              "--gpu-price", "3.5")
    assert code == 0
    assert any(ln.startswith("--write: nothing to change") for ln in lines)
    assert {k: v for k, v in _files(root).items() if k in written} == written
    costs = [ln.split() for ln in lines if ln.startswith("model.support.")]
    assert [c[0] for c in costs] == ["model.support.ticket_teams", "model.support.ticket_titles",
                                     "model.support.urgent_tickets"]
    assert costs[0][1:3] == ["AI.CLASSIFY", "4"]  # four tickets, one prompt each


def test_not_a_dbt_project(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello\n")
    code, lines, err = _migrate(capsys, tmp_path, "--write")
    assert code == 2 and lines == []
    assert err.strip() == f"quail migrate: error: {tmp_path} is not a dbt project (it has no " \
                          "dbt_project.yml)"
    assert _files(tmp_path) == {"notes.txt": b"hello\n"}


def test_a_dialect_that_cannot_be_detected(tmp_path, capsys):
    root = _copy("migrate_bigquery", tmp_path)
    (root / "profiles.yml").write_text(
        "support:\n  target: dev\n  outputs:\n    dev: {type: postgres, host: db}\n")
    before = _files(root)
    code, lines, err = _migrate(capsys, root, "--write")
    assert code == 2 and lines == [] and len(err.strip().splitlines()) == 1
    assert "cannot detect the dialect" in err and "--from" in err
    assert _files(root) == before


def test_no_model_compiles(tmp_path, capsys):
    root = _copy("migrate_bigquery", tmp_path)
    for model in (root / "models").glob("*.sql"):
        model.unlink()
    (root / "models" / "ticket_teams.sql").write_text("select {{ bigquery_only_macro() }} as x\n")
    before = _files(root)
    code, lines, err = _migrate(capsys, root, "--write")
    assert code == 2 and lines == [] and len(err.strip().splitlines()) == 1
    assert "no model of support compiles" in err
    assert _files(root) == before
