"""Multi-label classification on the real embedded default model (float32, CPU): each row's
value is a list of labels from the given set, and each vendor's unnesting idiom returns one row
per label of that row."""

import json

import duckdb
import pytest

from quail_engine.exec.facade import SessionConfig, open_session

pytestmark = pytest.mark.model

LABELS = ["price", "quality", "delivery", "customer service"]
DOCS = [(1, "Great price, but delivery took three weeks."),
        (2, "The stitching came apart after a week and support never replied."),
        (3, "Shipping was fast and it was cheap."),
        (4, None)]
SF_LIST = "['price', 'quality', 'delivery', 'customer service']"
DB_LIST = "'[\"price\", \"quality\", \"delivery\", \"customer service\"]'"
LISTS = {
    "snowflake": f"SELECT id, AI_CLASSIFY(body, {SF_LIST}, {{'output_mode': 'multi'}}):labels "
                 "AS labels FROM docs",
    "bigquery": f"SELECT id, AI.CLASSIFY(body, {SF_LIST}, output_mode => 'multi') AS labels "
                "FROM docs",
    "databricks": f"SELECT id, ai_classify(body, {DB_LIST}, map('multilabel', 'true')):response "
                  "AS labels FROM docs",
}
UNNESTED = {
    "snowflake": "SELECT id, f.value::string AS label FROM docs, LATERAL FLATTEN(input => "
                 f"AI_CLASSIFY(body, {SF_LIST}, {{'output_mode': 'multi'}}):labels) f",
    "bigquery": f"SELECT id, label FROM docs, UNNEST(AI.CLASSIFY(body, {SF_LIST}, "
                "output_mode => 'multi')) AS label",
    "databricks": f"SELECT id, explode(from_json(ai_classify(body, {DB_LIST}, map('multilabel', "
                  "'true')):response, 'array<string>')) AS label FROM docs",
}


@pytest.fixture(scope="module")
def session():
    con = duckdb.connect()
    con.execute("CREATE TABLE docs (id INTEGER, body VARCHAR)")
    con.executemany("INSERT INTO docs VALUES (?, ?)", DOCS)
    return open_session(con, SessionConfig(use_cache=False, precision="fp32"))


def _labels(value) -> list | None:
    return json.loads(value) if isinstance(value, str) else value


@pytest.fixture(scope="module")
def expected(session) -> dict[int, list]:
    """Each row's labels, as the Snowflake list form returns them."""
    rows = session.execute(LISTS["snowflake"], "snowflake").to_pylist()
    return {r["id"]: _labels(r["labels"]) for r in rows}


def test_multi_label_values_are_lists_of_the_given_labels(expected):
    assert expected[4] is None  # a NULL input: NULL, not an invented answer
    for i in (1, 2, 3):
        assert isinstance(expected[i], list) and set(expected[i]) <= set(LABELS)
        assert len(set(expected[i])) == len(expected[i])
    assert any(len(expected[i]) >= 2 for i in (1, 2, 3))  # several labels, not one


# not Snowflake's own form: `expected` is its answer, and a query compared with itself passes
@pytest.mark.parametrize("dialect", sorted(set(LISTS) - {"snowflake"}))
def test_every_dialect_returns_the_same_label_lists(session, expected, dialect):
    rows = session.execute(LISTS[dialect], dialect).to_pylist()
    assert {r["id"]: _labels(r["labels"]) for r in rows} == expected


@pytest.mark.parametrize("dialect", sorted(UNNESTED))
def test_unnesting_idiom_returns_one_row_per_label(session, expected, dialect):
    rows = session.execute(UNNESTED[dialect], dialect).to_pylist()
    got: dict[int, list] = {}
    for r in rows:
        got.setdefault(r["id"], []).append(r["label"])
    want = {i: labels for i, labels in expected.items() if labels}
    assert {i: sorted(v) for i, v in got.items()} == {i: sorted(v) for i, v in want.items()}
