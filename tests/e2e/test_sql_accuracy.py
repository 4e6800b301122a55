"""Answer quality through the product path: SQL in a warehouse dialect -> planner -> engine, on the
default model, over the team's labelled reviews (tests/data/reviews_labelled.jsonl). The engine's
own accuracy test (tests/unit/engine) asks through infer/prompt_layout.py; this one checks that the prompts the
planner renders from SQL keep that quality."""

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from quail_engine.exec.session import QuailSession

pytestmark = pytest.mark.model

DATA = Path(__file__).resolve().parents[1] / "data" / "reviews_labelled.jsonl"

QUERIES = {
    "snowflake": """SELECT id, truth,
        AI_FILTER(PROMPT('Is this review positive? {0}', review)) AS is_positive,
        AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::STRING AS label
        FROM reviews ORDER BY id""",
    "bigquery": """SELECT id, truth,
        AI.IF(('Is this review positive? ', review)) AS is_positive,
        AI.CLASSIFY(review, categories => ['positive', 'negative']) AS label
        FROM reviews ORDER BY id""",
}


@pytest.fixture(scope="module")
def reviews():
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["kind"] == "review"]


@pytest.mark.parametrize("dialect", sorted(QUERIES))
def test_filter_and_classify_reach_085_from_sql(engine, reviews, dialect):
    con = duckdb.connect()
    con.register("reviews", pa.table({"id": list(range(len(reviews))),
                                      "review": [r["text"] for r in reviews],
                                      "truth": [r["sentiment"] for r in reviews]}))
    out = QuailSession(con, lambda: engine).execute(
        QUERIES[dialect], dialect).to_pylist()
    assert len(out) == len(reviews) >= 40
    filter_acc = sum(r["is_positive"] == (r["truth"] == "positive") for r in out) / len(out)
    classify_acc = sum(r["label"] == r["truth"] for r in out) / len(out)
    assert filter_acc >= 0.85, f"filter accuracy {filter_acc:.3f}"
    assert classify_acc >= 0.85, f"classify accuracy {classify_acc:.3f}"
