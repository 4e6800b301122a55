"""Two-argument questions through the product path (SQL -> planner -> engine) on the real default
model: the held-out split of tests/data/pairs_labelled.jsonl, asked as a filter over two columns
and as a join, and a filter whose topic is a string argument. Before the pair layout these asked
yes/no and said yes to nearly everything (0.53 on this split; bench/pair_accuracy.py)."""

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from quail_engine.exec.session import QuailSession

pytestmark = pytest.mark.model

DATA = Path(__file__).resolve().parents[1] / "data" / "pairs_labelled.jsonl"
SHOES = ["These shoes are fantastic, I ran ten miles on muddy trails and my feet felt great.",
         "The sole fell apart after two weeks. Terrible quality, I want a refund.",
         "Super comfortable and light, best running shoes I have owned.",
         "They gave me blisters on the first run and the laces keep coming undone.",
         "Absolutely love these shoes, great grip on rocky paths."]


@pytest.fixture(scope="module")
def held_out():
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["split"] == "test"]


def run(engine, sql: str, **tables) -> list[dict]:
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, pa.table(table))
    return QuailSession(con, lambda: engine).execute(sql, "snowflake").to_pylist()


def sql_text(template: str) -> str:
    return template.replace("\n", "\\n").replace("'", "\\'")


def test_held_out_pairs_as_filters_and_joins(engine, held_out):
    right = total = 0
    for template in dict.fromkeys(r["template"] for r in held_out):
        rows = [r for r in held_out if r["template"] == template]
        table = {"k": list(range(len(rows))), "a": [r["a"] for r in rows],
                 "b": [r["b"] for r in rows], "label": [r["label"] for r in rows]}
        as_filter = run(engine, f"""SELECT label,
            AI_FILTER(PROMPT('{sql_text(template)}', a, b)) AS got FROM pairs""", pairs=table)
        right += sum(r["got"] == r["label"] for r in as_filter)
        total += len(as_filter)
        kept = run(engine, f"""SELECT d.k FROM docs AS d JOIN partners AS p ON d.k = p.k
            AND AI_FILTER(PROMPT('{sql_text(template)}', d.a, p.b))""",
                   docs={"k": table["k"], "a": table["a"]},
                   partners={"k": table["k"], "b": table["b"]})
        kept_keys = {r["k"] for r in kept}
        right += sum((k in kept_keys) == r["label"] for k, r in zip(table["k"], rows))
        total += len(rows)
    assert total == 2 * len(held_out) >= 180
    assert right / total >= 0.75, f"pair accuracy {right / total:.3f}"


def test_a_topic_passed_as_an_argument_is_checked_against_each_review(engine):
    table = {"review": SHOES}
    rows = run(engine, """SELECT
        AI_FILTER(PROMPT('Does this review: {0} talk about {1}?', review,
                         'a rocket engine for space travel')) AS rocket,
        AI_FILTER(PROMPT('Does this review: {0} talk about {1}?', review, 'shoes')) AS shoes
        FROM reviews""", reviews=table)
    assert sum(r["rocket"] for r in rows) == 0
    assert sum(r["shoes"] for r in rows) >= 3
