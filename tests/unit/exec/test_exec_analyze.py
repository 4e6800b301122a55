"""`explain` with a plan: estimates without a model, and --analyze with actuals."""

import argparse
import json

import pytest
from exec_fakes import patch_fake_model

import quail_engine.exec.analyze as analyze
from quail_engine.cli.analyze import add_analyze_args, run_analyze, wants_plan
from quail_engine.plan.cost import ModelSpec
from quail_engine.sql.query import parse

SQL = ("SELECT r.id, p.name FROM reviews r JOIN products p ON r.product_id = p.product_id AND "
       "AI_FILTER(PROMPT('Is {0} about {1}?', r.review, p.name)) WHERE AI_FILTER(PROMPT("
       "'Mentions PRICE? {0}', r.review)) AND AI_FILTER(PROMPT('Is it GOOD? {0}', r.review))")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "reviews.csv").write_text(
        "id,review,product_id\n1,good price widget,1\n2,bad gadget,2\n3,good good price,1\n")
    (tmp_path / "products.csv").write_text("product_id,name\n1,widget\n2,gadget\n")
    return tmp_path


def args_for(files, *extra):
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", dest="fmt", default="text")
    add_analyze_args(ap)
    return ap.parse_args(["--table", f"reviews={files / 'reviews.csv'}", "--table",
                          f"products={files / 'products.csv'}", "--quiet", "--cache-dir",
                          str(files / "cache"), *extra])


def test_estimates_without_model(files, monkeypatch, capsys):
    monkeypatch.setattr(analyze, "model_spec", lambda model: ModelSpec(
        "toy", 4, 64, 4, 1, 16, 128, 1000))
    args = args_for(files, "--format", "json")
    assert wants_plan(args)
    assert run_analyze(args, parse(SQL, "snowflake")) == 0
    plan = json.loads(capsys.readouterr().out)["plans"][0]
    kinds = [s["kind"] for s in plan["steps"]]
    assert kinds == ["scan", "scan", "filter", "filter", "join"]
    assert all(s["est_seconds"] > 0 and s["est_fresh_tokens"] > 0 for s in plan["steps"][2:])
    assert "r.product_id = p.product_id" in plan["logical"]


def test_estimates_say_which_anchor_hint_they_do_not_follow(files, monkeypatch, capsys):
    """A hint naming the side that is not the join's document: the plan anchors on the document
    and says why (explain's estimates used to fail on it)."""
    monkeypatch.setattr(analyze, "model_spec", lambda model: ModelSpec(
        "toy", 4, 64, 4, 1, 16, 128, 1000))
    sql = SQL.replace("r.review, p.name))", "r.review, p.name), {'anchor': 'p'})", 1)
    assert run_analyze(args_for(files), parse(sql, "snowflake")) == 0
    out = capsys.readouterr().out
    assert "anchor=r" in out
    assert "remark: ai_join #0: the anchor hint 'p' is not followed" in out, out


def test_analyze_runs_and_reports_actuals(files, monkeypatch, capsys):
    patch_fake_model(monkeypatch)
    args = args_for(files, "--analyze", "--report", str(files / "rep.json"))
    assert run_analyze(args, parse(SQL, "snowflake")) == 0
    out = capsys.readouterr().out
    assert "speed of light" in out and "fresh" in out
    rep = json.loads((files / "rep.json").read_text())
    by_kind = {o["kind"]: o for o in rep["operators"]}
    assert by_kind["ai_join"]["rows_in"] >= by_kind["ai_join"]["rows_out"]
    assert rep["sol_seconds"] > 0
