"""`quail explain` and `quail transpile` on the repository's examples, as a user runs them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quail_engine.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*/*.sql"))
DIALECTS = ("snowflake", "bigquery", "databricks", "duckdb")


def test_every_dialect_has_examples():
    assert {p.parent.name for p in EXAMPLES} == set(DIALECTS)
    assert (ROOT / "examples" / "snowflake" / "reviews.sql").is_file()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_explain_json_lists_the_ai_operators(path, capsys):
    assert main(["explain", str(path), "--dialect", path.parent.name, "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["ai_operators"], "every example calls an AI function"
    for op in plan["ai_operators"]:
        assert {"op", "template", "bindings", "labels"} <= set(op)
        assert all({"alias", "column"} <= set(b) for b in op["bindings"])
    assert "quail_ai_0(" in plan["duckdb_sql"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("target", DIALECTS)
def test_transpile_examples_to_every_dialect(path, target, capsys):
    assert main(["transpile", str(path), "--read", path.parent.name, "--write", target]) == 0
    out = capsys.readouterr().out
    assert out.strip()
    assert main(["explain", "-e", out, "--dialect", target]) == 0


def test_explain_text_names_operators_cores_and_sql(capsys):
    path = ROOT / "examples" / "snowflake" / "reviews.sql"
    assert main(["explain", str(path), "--dialect", "snowflake"]) == 0
    out = capsys.readouterr().out
    assert "ai_filter(" in out and "ai_classify(" in out
    assert "core 0: filters=[1]" in out
    assert "duckdb sql:" in out


def test_transpile_refusal_exits_2_with_reason(capsys):
    code = main(["transpile", "-e", "SELECT AI_AGG(review, 'x') FROM t", "--read", "snowflake",
                 "--write", "databricks"])
    assert code == 2
    assert "no AI aggregate function" in capsys.readouterr().err


def test_transpile_snowflake_filter_to_databricks_idiom(capsys):
    assert main(["transpile", "-e", "SELECT id FROM t WHERE AI_FILTER(PROMPT('Good? {0}', r))",
                 "--read", "snowflake", "--write", "databricks"]) == 0
    assert capsys.readouterr().out.strip() == (
        "SELECT id FROM t WHERE (ai_classify(CONCAT('Good? ', r), ARRAY('yes', 'no')) = 'yes')")


def test_missing_file_and_both_inputs_are_user_errors(capsys):
    assert main(["explain", "no/such.sql", "--dialect", "duckdb"]) == 2
    assert "no such SQL file" in capsys.readouterr().err
    assert main(["explain", "x.sql", "-e", "SELECT 1", "--dialect", "duckdb"]) == 2


def test_module_entry_point_runs():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "quail_engine", "transpile", "-e",
                           "SELECT AI.IF(('Is ', x, ' ok')) FROM t", "--read", "bigquery",
                           "--write", "snowflake"], capture_output=True, text=True, env=env,
                          cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "SELECT AI_FILTER(PROMPT('Is {0} ok', x)) FROM t"


@pytest.mark.parametrize("command", [["explain", "--dialect", "bigquery"],
                                     ["transpile", "--read", "bigquery", "--write", "duckdb"],
                                     ["query", "--dialect", "bigquery"]])
def test_an_execute_option_of_a_lone_double_dash_is_a_clean_error(command, capsys):
    """argparse reads `--execute=--` as an empty list: an error naming -e, not exit 3."""
    assert main([command[0], "--execute=--", *command[1:]]) == 2
    assert "-e/--execute got no SQL text" in capsys.readouterr().err
