"""Snowflake's LATERAL FLATTEN over any JSON value, run through a real session on DuckDB: the
columns Snowflake documents (KEY, PATH, INDEX, VALUE, THIS) with their values and types. It
failed with DuckDB's parser error ("syntax error at or near JOIN") for every form but the
multi-label AI_CLASSIFY one. The forms over plain JSON need no model; those over an AI result
load the embedded models."""

from __future__ import annotations

import json

import duckdb
import pytest

from quail_engine.exec.facade import SessionConfig, open_session
from quail_engine.sql.errors import SqlError

ROWS = [(1, '[1, "a", {"b": 3}]'), (2, '{"x": "y", "z": [1]}'), (3, "7"), (4, None), (5, "[]")]


@pytest.fixture(scope="module")
def session():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, j VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", ROWS)
    return open_session(con, SessionConfig(use_cache=False, precision="fp32"))


def test_flatten_gives_snowflakes_columns_per_element(session):
    """An array's elements by INDEX (KEY NULL), an object's fields by KEY (INDEX NULL); a scalar,
    a NULL and an empty array give no row; VALUE and THIS are JSON."""
    table = session.execute(
        "SELECT t.id, f.key, f.path, f.index, f.value, TYPEOF(f.value) AS vt, f.this, "
        "TYPEOF(f.index) AS it FROM t, LATERAL FLATTEN(input => PARSE_JSON(t.j)) f "
        "ORDER BY t.id, f.index, f.key", "snowflake")
    rows = [(r["id"], r["key"], r["path"], r["index"], json.loads(r["value"]))
            for r in table.to_pylist()]
    assert rows == [(1, None, "[0]", 0, 1), (1, None, "[1]", 1, "a"),
                    (1, None, "[2]", 2, {"b": 3}), (2, "x", "x", None, "y"),
                    (2, "z", "z", None, [1])]
    assert set(table.column("vt").to_pylist()) == {"JSON"}
    assert set(table.column("it").to_pylist()) == {"BIGINT"}
    assert json.loads(table.column("this")[0].as_py()) == [1, "a", {"b": 3}]


def test_outer_keeps_rows_that_have_nothing_to_flatten(session):
    table = session.execute("SELECT t.id, f.value FROM t, LATERAL FLATTEN(input => "
                            "PARSE_JSON(t.j), outer => TRUE) f ORDER BY t.id, f.index, f.key",
                            "snowflake")
    assert table.column("id").to_pylist() == [1, 1, 1, 2, 2, 3, 4, 5]
    assert table.column("value").to_pylist()[5:] == [None, None, None]


@pytest.mark.parametrize("sql,expected", [
    # a string element cast to text has no JSON quotes; a number stays a number
    ("SELECT f.value::string AS v FROM TABLE(FLATTEN(input => PARSE_JSON('[\"a\", 2]'))) f "
     "ORDER BY f.index", ["a", "2"]),
    ("SELECT f.value::int AS v FROM TABLE(FLATTEN(input => PARSE_JSON('[5, 6]'))) f "
     "ORDER BY f.index", [5, 6]),
    # path => reaches into the value first; PATH then starts with it
    ("SELECT f.path AS v FROM TABLE(FLATTEN(input => PARSE_JSON('{\"a\": {\"k\": 1, "
     "\"x y\": 2}}'), path => 'a')) f ORDER BY f.key", ["a.k", "a['x y']"]),
    # mode => 'ARRAY' leaves objects unflattened
    ("SELECT t.id AS v FROM t, LATERAL FLATTEN(input => PARSE_JSON(t.j), mode => 'ARRAY') f "
     "ORDER BY t.id", [1, 1, 1]),
    # an unnamed FLATTEN's columns unqualified; a subscript of a value counts from 0
    ("SELECT value[1]::string AS v FROM LATERAL FLATTEN(input => PARSE_JSON('[[\"p\", \"q\"]]'))",
     ["q"]),
])
def test_flatten_arguments_and_column_reads(session, sql, expected):
    assert session.execute(sql, "snowflake").column("v").to_pylist() == expected


@pytest.mark.parametrize("sql,message", [
    ("SELECT f.seq FROM t, LATERAL FLATTEN(input => PARSE_JSON(t.j)) f", "SEQ column"),
    ("SELECT f.value FROM t, LATERAL FLATTEN(input => PARSE_JSON(t.j), recursive => TRUE) f",
     "recursive"),
    ("SELECT f.value FROM t, LATERAL FLATTEN(input => PARSE_JSON(t.j), mode => 'LIST') f",
     "'LIST'"),
])
def test_unsupported_flatten_forms_are_refused_by_name(session, sql, message):
    with pytest.raises(SqlError, match=message):
        session.execute(sql, "snowflake")


@pytest.fixture(scope="module")
def ai_session(require_embedded):
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    con = duckdb.connect()
    con.execute("CREATE TABLE docs (id INTEGER, body VARCHAR)")
    con.executemany("INSERT INTO docs VALUES (?, ?)", [
        (1, "Alice Smith paid 45 dollars for two lamps in Paris."),
        (2, "The blender broke after two days; Bob wants a refund.")])
    return open_session(con, SessionConfig(use_cache=False, precision="fp32"))


@pytest.mark.model
def test_flatten_over_an_extraction_gives_one_row_per_field(ai_session):
    table = ai_session.execute(
        "SELECT d.id, f.key, f.value, TYPEOF(f.value) AS vt FROM docs d, LATERAL FLATTEN("
        "input => AI_EXTRACT(d.body, {'name': 'Who is the person?', 'city': 'Which city?'})"
        ":response) f ORDER BY d.id, f.key", "snowflake")
    assert [(r["id"], r["key"]) for r in table.to_pylist()] == [
        (1, "city"), (1, "name"), (2, "city"), (2, "name")]
    assert set(table.column("vt").to_pylist()) == {"JSON"}
    assert all(isinstance(json.loads(v), str | type(None)) for v in table.column("value").to_pylist())


@pytest.mark.model
def test_flatten_over_a_response_format_array_gives_its_strings(ai_session):
    table = ai_session.execute(
        "SELECT d.id, f.index, f.value::string AS tag FROM docs d, LATERAL FLATTEN(input => "
        "AI_COMPLETE('m', 'Give two tags for: ' || d.body, response_format => {'type': 'json', "
        "'schema': {'type': 'object', 'properties': {'tags': {'type': 'array', 'items': "
        "{'type': 'string'}}}, 'required': ['tags']}}):tags) f ORDER BY d.id, f.index",
        "snowflake")
    assert table.num_rows >= 1
    for d in (1, 2):
        indexes = [r["index"] for r in table.to_pylist() if r["id"] == d]
        assert indexes == list(range(len(indexes)))
    assert all(isinstance(v, str) and not v.startswith('"') for v in table.column("tag").to_pylist())


@pytest.mark.model
def test_the_multi_label_flatten_still_gives_label_strings(ai_session):
    table = ai_session.execute(
        "SELECT d.id, f.value FROM docs d, LATERAL FLATTEN(input => AI_CLASSIFY(d.body, "
        "['money', 'refund', 'travel'], {'output_mode': 'multi'}):labels) f", "snowflake")
    assert set(table.column("value").to_pylist()) <= {"money", "refund", "travel"}
    assert not any(v.startswith('"') for v in table.column("value").to_pylist())


def _run_planned(session, sql: str, dialect: str):
    """`sql`'s rows, after checking every AI operator was asked by a plan (none unplanned)."""
    table = session.execute(sql, dialect)
    ops = session.report.ops.values()
    assert session.report.plans and ops
    assert all(o.prompts > 0 and o.unplanned == 0 for o in ops)
    return table


# (dialect, the labels unnested, the same labels as one list per row)
UNNESTED_LABELS = [
    ("snowflake",
     "SELECT d.id, f.value::string AS label FROM docs d, LATERAL FLATTEN(input => AI_CLASSIFY("
     "d.body, ['money', 'refund', 'travel'], {'output_mode': 'multi'}):labels) f",
     "SELECT d.id, AI_CLASSIFY(d.body, ['money', 'refund', 'travel'], {'output_mode': 'multi'})"
     ":labels AS labels FROM docs d"),
    ("bigquery",
     "SELECT d.id, label FROM docs d, UNNEST(AI.CLASSIFY(d.body, ['money', 'refund', 'travel'], "
     "output_mode => 'multi')) AS label",
     "SELECT d.id, AI.CLASSIFY(d.body, ['money', 'refund', 'travel'], output_mode => 'multi') "
     "AS labels FROM docs d"),
    ("databricks",
     "SELECT d.id, label FROM docs d LATERAL VIEW explode(from_json(ai_classify(d.body, "
     "'[\"money\", \"refund\", \"travel\"]', map('multilabel', 'true')):response, "
     "'array<string>')) x AS label",
     "SELECT d.id, from_json(ai_classify(d.body, '[\"money\", \"refund\", \"travel\"]', "
     "map('multilabel', 'true')):response, 'array<string>') AS labels FROM docs d"),
]


@pytest.mark.model
@pytest.mark.parametrize(("dialect", "unnested", "listed"), UNNESTED_LABELS,
                         ids=[c[0] for c in UNNESTED_LABELS])
def test_unnested_labels_are_planned_and_equal_the_listed_ones(ai_session, dialect, unnested,
                                                               listed):
    """The classification in FLATTEN's / UNNEST's / explode's input is asked by the planned
    operator over the docs' rows (it ran row by row inside DuckDB's lateral join, unplanned);
    DuckDB still gives one row per label, the labels the query without the unnesting lists."""
    table = _run_planned(ai_session, unnested, dialect)
    got = sorted((r["id"], r["label"]) for r in table.to_pylist())
    lists = ai_session.execute(listed, dialect).to_pylist()
    want = sorted((r["id"], label) for r in lists for label in r["labels"])
    assert want, "the model decided no label: the comparison would not test anything"
    assert got == want


def test_explain_with_a_database_shows_the_lowered_statement(tmp_path, capsys):
    """`quail explain --database` of a statement with nothing to plan printed an empty line; it
    shows the statement as DuckDB runs it, FLATTEN as json_each."""
    from quail_engine.cli import main

    path = tmp_path / "f.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT 1 AS id, '[1, 2]' AS j")
    con.close()
    assert main(["explain", "-e", "SELECT f.value FROM t, LATERAL FLATTEN(input => "
                 "PARSE_JSON(t.j)) f", "--dialect", "snowflake", "--database", str(path)]) == 0
    out = capsys.readouterr().out
    assert "duckdb sql:" in out and "json_each(" in out


# (dialect, a select-list call with an unqualified column beside an unnesting, the same call
# without it)
BESIDE_UNNESTING = [
    ("snowflake",
     "SELECT d.id, f.value::string AS tag, AI_CLASSIFY(body, ['money', 'refund', 'travel'])"
     ":labels[0]::string AS label FROM docs d, LATERAL FLATTEN(input => PARSE_JSON('[\"x\", "
     "\"y\"]')) f",
     "SELECT d.id, AI_CLASSIFY(d.body, ['money', 'refund', 'travel']):labels[0]::string AS label "
     "FROM docs d"),
    ("bigquery",
     "SELECT d.id, tag, AI.CLASSIFY(body, ['money', 'refund', 'travel'], output_mode => "
     "'single') AS label FROM docs d, UNNEST(['x', 'y']) AS tag",
     "SELECT d.id, AI.CLASSIFY(d.body, ['money', 'refund', 'travel'], output_mode => 'single') "
     "AS label FROM docs d"),
]


@pytest.mark.model
@pytest.mark.parametrize(("dialect", "beside", "alone"), BESIDE_UNNESTING,
                         ids=[c[0] for c in BESIDE_UNNESTING])
def test_an_unqualified_call_beside_an_unnesting_is_planned(ai_session, dialect, beside, alone):
    """`body` can only be the docs' column (FLATTEN gives SEQ ... THIS, the UNNEST its alias):
    the call is the core's projection over the docs' rows (it ran row by row, unplanned, as its
    column had two relations to come from), with the answers the call without the unnesting
    gives, once per tag."""
    table = _run_planned(ai_session, beside, dialect)
    got = sorted((r["id"], r["tag"], r["label"]) for r in table.to_pylist())
    labels = {r["id"]: r["label"] for r in ai_session.execute(alone, dialect).to_pylist()}
    assert got == sorted((i, tag, label) for i, label in labels.items() for tag in ("x", "y"))
