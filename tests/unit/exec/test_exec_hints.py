"""A selectivity hint orders the filters; it does not switch the planner off or change rows."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
from exec_fakes import patch_fake_model

from quail_engine.cli import main

HINTED = ("SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Does this review mention PRICE? {0}', "
          "review), {'selectivity': 0.9}) AND AI_FILTER(PROMPT('Is the BATTERY good? {0}', "
          "review), {'selectivity': 0.1}) ORDER BY id")


def _run(tmp_path, sql, name, capsys):
    report = tmp_path / f"{name}.json"
    rc = main(["query", "-e", sql, "--dialect", "snowflake", "--quiet", "--no-cache",
               "--table", f"reviews={tmp_path / 'r.parquet'}", "--report", str(report),
               "--format", "json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out, json.loads(report.read_text())


def test_hinted_filters_are_planned_in_hint_order_with_the_same_rows(tmp_path, monkeypatch,
                                                                     capsys):
    reviews = ["price and price", "battery battery", "price price battery battery", "none",
               "battery battery price", "great price price"] * 2
    pq.write_table(pa.Table.from_pylist([{"id": i, "review": r}
                                         for i, r in enumerate(reviews)]), tmp_path / "r.parquet")
    patch_fake_model(monkeypatch)
    hinted, rep = _run(tmp_path, HINTED, "hinted", capsys)
    plain, _ = _run(tmp_path, HINTED.replace(", {'selectivity': 0.9}", "").replace(
        ", {'selectivity': 0.1}", ""), "plain", capsys)
    assert hinted == plain and hinted.strip()
    assert rep["plans"] and all(o["unplanned"] == 0 for o in rep["operators"])
    steps = rep["plans"][0].splitlines()
    order = [line.split()[1] for line in steps if line.startswith("filter #")]
    assert order == ["#1", "#0"]  # the 0.1 filter first: rank = cost / (1 - selectivity)
    first = next(o for o in rep["operators"] if o["op"] == 1)
    assert first["selectivity_source"] == "hint" and first["rows_in"] == len(reviews)
