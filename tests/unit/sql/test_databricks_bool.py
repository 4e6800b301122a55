"""Databricks' three ways to ask a yes/no question (it has no ai_filter) are planned as the
same ai_filter / ai_join as a plain `ai_filter`: in a core's filters or joins, not run row by
row through a DuckDB function; the opposite answer is NOT of that filter (planned, negated)."""

import dataclasses
import json
from pathlib import Path

import duckdb
import pytest

from quail_engine.cli import main
from quail_engine.sql.ir import OpKind
from quail_engine.sql.query import parse

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "data"
Q = "Is this product review positive? Review: "
J = ("Does the review ", " describe the product ", "?")
SCHEMA = json.dumps({"type": "json_schema", "json_schema": {"name": "verdict", "schema": {
    "type": "object", "properties": {"answer": {"type": "boolean"}}}, "strict": True}})
BRACED_SCHEMA = SCHEMA.replace("{", "{{").replace("}", "}}")  # literal braces under .format

# (name, Databricks spelling of "ask <prompt> and keep the yes rows"); {p} is the prompt
FORMS = [
    ("struct_cast", "ai_query('ep', {p}, responseFormat => 'STRUCT<answer: BOOLEAN>')"
                    ":answer::boolean"),
    ("struct_bare", "ai_query('ep', {p}, responseFormat => 'STRUCT<answer: BOOLEAN>'):answer"),
    ("struct_cast_fn", "CAST(ai_query('ep', {p}, responseFormat => 'STRUCT<answer: BOOLEAN>')"
                       ":answer AS BOOLEAN)"),
    ("json_schema", "ai_query('ep', {p}, responseFormat => '" + BRACED_SCHEMA
                    + "'):answer::boolean"),
    ("query_TRUE", "ai_query('ep', {p}) = 'TRUE'"),
    ("query_true_left", "'true' = ai_query('ep', {p})"),
    ("query_Yes", "ai_query('ep', {p}) = 'Yes'"),
    ("query_upper_YES", "upper(ai_query('ep', {p})) = 'YES'"),
    ("query_lower_true", "lower(ai_query('ep', {p})) = 'true'"),
    ("query_not_FALSE", "ai_query('ep', {p}) <> 'FALSE'"),
    ("classify_TRUE", "ai_classify({p}, ARRAY('TRUE', 'FALSE')) = 'TRUE'"),
    ("classify_false_true", "ai_classify({p}, ARRAY('false', 'true')) = 'true'"),
    ("classify_yes", "ai_classify({p}, ARRAY('yes', 'no')) = 'yes'"),
    ("classify_upper", "upper(ai_classify({p}, ARRAY('yes', 'no'))) = 'YES'"),
]
NEGATED = [
    ("query_FALSE", "ai_query('ep', {p}) = 'FALSE'"),
    ("query_not_TRUE", "ai_query('ep', {p}) <> 'TRUE'"),
    ("query_no", "ai_query('ep', {p}) = 'no'"),
    ("classify_FALSE", "ai_classify({p}, ARRAY('TRUE', 'FALSE')) = 'FALSE'"),
    ("classify_not_yes", "ai_classify({p}, ARRAY('yes', 'no')) != 'yes'"),
]
# look alike but mean something else in Databricks: left as written
NOT_BOOLEAN = [
    ("classify_wrong_case", "ai_classify({p}, ARRAY('TRUE', 'FALSE')) = 'true'",  # never true
     OpKind.AI_CLASSIFY),
    ("classify_three_labels", "ai_classify({p}, ARRAY('yes', 'no', 'maybe')) = 'yes'",
     OpKind.AI_CLASSIFY),
    ("upper_lowercase", "upper(ai_query('ep', {p})) = 'yes'", OpKind.AI_GENERATE),  # never true
    ("json_text", "ai_query('ep', {p}) = 'sure'", OpKind.AI_GENERATE),
    ("format_then_text", "ai_query('ep', {p}, responseFormat => 'STRUCT<answer: BOOLEAN>') = "
                         "'TRUE'", OpKind.AI_GENERATE),  # the text is JSON
    ("string_field", "ai_query('ep', {p}, responseFormat => 'STRUCT<answer: STRING>'):answer",
     OpKind.AI_GENERATE),
    ("field_as_text", "ai_query('ep', {p}, responseFormat => 'STRUCT<answer: BOOLEAN>')"
                      ":answer::string", OpKind.AI_GENERATE),
]


def where_sql(form: str) -> str:
    return (f"SELECT id FROM reviews WHERE {form.format(p=f'concat({Q!r}, review)')} "
            "AND id <= 12 ORDER BY id")


def join_sql(form: str) -> str:
    p = f"concat('{J[0]}', r.review, '{J[1]}', p.name, '{J[2]}')"
    return (f"SELECT r.id, p.name FROM reviews AS r JOIN products AS p ON "
            f"{form.format(p=p)} WHERE r.id <= 2 ORDER BY r.id, p.name")


PLAIN_WHERE = f"SELECT id FROM reviews WHERE ai_filter({Q!r} || review) AND id <= 12 ORDER BY id"
PLAIN_NOT = f"SELECT id FROM reviews WHERE NOT ai_filter({Q!r} || review) AND id <= 12 ORDER BY id"
PLAIN_JOIN = (f"SELECT r.id, p.name FROM reviews AS r JOIN products AS p ON ai_filter("
              f"'{J[0]}' || r.review || '{J[1]}' || p.name || '{J[2]}') WHERE r.id <= 2 "
              "ORDER BY r.id, p.name")


def canonical(parsed):
    """The query's ops and cores with the vendor-only fields (wrapper, endpoint) cleared."""
    ops = [dataclasses.replace(op, wrapper=None, options=dataclasses.replace(
        op.options, model=None, on_error="null")) for op in parsed.ai_ops]
    return [op.to_text() for op in ops], [c.to_text() for c in parsed.cores]


@pytest.mark.parametrize("name,form", FORMS, ids=[f[0] for f in FORMS])
def test_where_form_is_the_planned_filter_of_plain_ai_filter(name, form):
    parsed = parse(where_sql(form), "databricks")
    assert canonical(parsed) == canonical(parse(PLAIN_WHERE, "duckdb"))
    assert parsed.ai_ops[0].op == OpKind.AI_FILTER
    assert parsed.cores[0].filters == (0,)
    assert "FROM reviews WHERE quail_ai_0(review) AND id <= 12 ORDER BY" in parsed.duckdb_sql


@pytest.mark.parametrize("name,form", FORMS, ids=[f[0] for f in FORMS])
def test_join_form_is_the_planned_join_of_plain_ai_filter(name, form):
    parsed = parse(join_sql(form), "databricks")
    assert canonical(parsed) == canonical(parse(PLAIN_JOIN, "duckdb"))
    assert parsed.ai_ops[0].op == OpKind.AI_JOIN
    assert parsed.cores[0].joins == (0,)


@pytest.mark.parametrize("name,form", NEGATED, ids=[f[0] for f in NEGATED])
def test_opposite_answer_is_the_planned_negated_filter(name, form):
    parsed = parse(where_sql(form), "databricks")
    plain = parse(PLAIN_NOT, "duckdb")
    assert canonical(parsed)[0] == canonical(plain)[0]
    assert "FROM reviews WHERE NOT quail_ai_0(review) AND id <= 12 ORDER BY" in parsed.duckdb_sql
    assert "FROM reviews WHERE NOT quail_ai_0(review) AND id <= 12 ORDER BY" in plain.duckdb_sql
    assert [c.filters for c in parsed.cores] == [c.filters for c in plain.cores] == [(0,)]
    assert parsed.ai_ops[0].negated


@pytest.mark.parametrize("name,form,kind", NOT_BOOLEAN, ids=[f[0] for f in NOT_BOOLEAN])
def test_lookalikes_keep_their_own_meaning(name, form, kind):
    parsed = parse(where_sql(form), "databricks")
    op = parsed.ai_ops[0]
    assert op.op == kind
    if kind == OpKind.AI_CLASSIFY:  # a planned filter on its label, SQL's `=` kept exactly
        assert [c.filters for c in parsed.cores] == [(0,)]
        assert op.pass_labels == (() if name == "classify_wrong_case" else ("yes",))
        assert not op.passes("TRUE") and op.passes("yes") == (name != "classify_wrong_case")
    else:  # no filter: its text, compared as SQL says, asked of every row (a projection)
        assert [(c.filters, c.projections) for c in parsed.cores] == [((), (0,))]


@pytest.mark.parametrize("sql", [where_sql(FORMS[0][1]), join_sql(FORMS[4][1]),
                                 where_sql(FORMS[10][1])])
def test_explain_shows_an_ai_filter_in_a_core(sql, capsys):
    assert main(["explain", "-e", sql, "--dialect", "databricks", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    op = out["ai_operators"][0]
    assert op["op"] in ("ai_filter", "ai_join") and op["is_planned"]
    core = out["cores"][0]
    assert core["filters"] + core["joins"] == [0]


@pytest.fixture(scope="module")
def run(require_embedded):
    """`run(sql, dialect)`: rows and report of `sql` on the example data, with the smallest
    embedded model on CPU (one engine for the module, no answer cache; each query runs once)."""
    from quail_engine.exec.session import QuailSession
    from quail_engine.infer.engine import LocalEngine

    require_embedded("smollm2-135m")
    engine = LocalEngine.load("smollm2-135m", device="cpu", dtype="float32")
    con = duckdb.connect()
    for table in ("reviews", "products"):
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM "
                    f"read_csv_auto('{EXAMPLES / (table + '.csv')}')")

    seen: dict = {}

    def execute(sql, dialect):
        if (sql, dialect) not in seen:
            session = QuailSession(con.cursor(), lambda: engine)
            rows = [tuple(r.values()) for r in session.execute(sql, dialect).to_pylist()]
            seen[sql, dialect] = rows, session.report
        return seen[sql, dialect]
    return execute


@pytest.mark.model
@pytest.mark.parametrize("name,form", [FORMS[0], FORMS[3], FORMS[4], FORMS[7], FORMS[10],
                                       FORMS[12]], ids=lambda v: v if "(" not in v else "")
def test_rows_equal_plain_ai_filter_on_the_embedded_model(run, name, form):
    want, _ = run(PLAIN_WHERE, "duckdb")
    got, report = run(where_sql(form), "databricks")
    assert got == want and want
    assert [o.kind for o in report.ops.values()] == ["ai_filter"]
    assert sum(o.unplanned for o in report.ops.values()) == 0


@pytest.mark.model
@pytest.mark.parametrize("name,form", [FORMS[0], FORMS[4], FORMS[10]],
                         ids=lambda v: v if "(" not in v else "")
def test_join_rows_equal_plain_ai_filter_on_the_embedded_model(run, name, form):
    want, _ = run(PLAIN_JOIN, "duckdb")
    got, report = run(join_sql(form), "databricks")
    assert got == want
    assert [o.kind for o in report.ops.values()] == ["ai_join"]
    assert sum(o.unplanned for o in report.ops.values()) == 0


@pytest.mark.model
def test_opposite_answer_rows_equal_not_ai_filter_on_the_embedded_model(run):
    want, _ = run(PLAIN_NOT, "duckdb")
    got, _ = run(where_sql(NEGATED[0][1]), "databricks")
    assert got == want
    everything, _ = run("SELECT id FROM reviews WHERE id <= 12 ORDER BY id", "duckdb")
    yes, _ = run(PLAIN_WHERE, "duckdb")
    assert sorted(got + yes) == everything


@pytest.mark.parametrize("form,expected", [
    (FORMS[10][1], "WHERE AI_FILTER(PROMPT("), (NEGATED[3][1], "WHERE NOT AI_FILTER(PROMPT(")])
def test_transpiles_to_snowflake_ai_filter_without_a_shape_warning(form, expected, caplog):
    from quail_engine.sql.transpiler import transpile

    out = transpile(where_sql(form), "databricks", "snowflake")
    assert expected + f"'{Q}{{0}}', review))" in out
    assert "result shape" not in caplog.text


def test_opposite_answer_in_join_on_is_a_planned_negated_ai_join():
    parsed = parse(join_sql(NEGATED[1][1]), "databricks")
    assert parsed.ai_ops[0].op == OpKind.AI_JOIN and parsed.ai_ops[0].negated
    assert "ON NOT quail_ai_0(r.review, p.name)" in parsed.duckdb_sql
    assert [c.joins for c in parsed.cores] == [(0,)]
