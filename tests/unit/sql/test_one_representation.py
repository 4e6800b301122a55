"""The front end reads the user's SQL once: what it writes itself (a binding's DuckDB text, the
statement's duckdb_sql) is never parsed again, here or by the executor's statement tree."""

import dataclasses
import json

import duckdb
import pytest
import sqlglot

from quail_engine.exec import tasks
from quail_engine.exec.prompts import _filter_partner
from quail_engine.exec.scans import load_scan
from quail_engine.exec.session import dependency_order
from quail_engine.exec.udfs import create_ai_function, prepare_scan
from quail_engine.settings import DIALECTS
from quail_engine.sql import dialects, parse, query, response_schema, shapes, transpile
from quail_testing.sql_guard import refuse_our_text, refuse_written_text

LITERAL = ("SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Is {0} about {1}?', review, 'price')) "
           "AND id < 30")
SEEN_THROUGH = ("WITH c AS (SELECT r.id, r.review, AI_CLASSIFY(r.review, ['positive', "
                "'negative']):labels[0]::STRING AS sentiment FROM reviews AS r) SELECT c.id, "
                "AI_CLASSIFY(c.review, ['price', 'quality']):labels[0]::STRING AS topic FROM c "
                "WHERE c.sentiment = 'negative'")




@pytest.fixture
def no_reading_back(monkeypatch):
    # every dialect loaded first: sqlglot's own dialect modules parse type strings when first
    # imported (hive's typing: 'ARRAY<STRING>'), which is not our text read back; run alone,
    # this file would otherwise import them under the guard and fail on them
    for name in DIALECTS:
        dialects.get(name)

    def refuse(*args, **kwargs):
        raise AssertionError(f"SQL text parsed again: {args[:1]}")
    monkeypatch.setattr(sqlglot, "parse_one", refuse)
    monkeypatch.setattr(query, "statement_tree", refuse)
    refuse_our_text(monkeypatch)  # every parser, however a module imported it


@pytest.fixture
def nothing_written_read_back(no_reading_back, monkeypatch):
    """No parser reads text a generator wrote either (quail_testing/sql_guard.WrittenText):
    the query path, unlike transpile's deliberate read-back."""
    return refuse_written_text(monkeypatch)


@pytest.mark.parametrize("sql, cores, statement", [
    (LITERAL, ["core(relations=[reviews[b_0_0, b_0_1]]; filters=[0]; joins=[]; "
               "projections=[])"],
     "SELECT id FROM reviews WHERE quail_ai_0(CAST(review AS TEXT), CAST('price' AS TEXT)) "
     "AND id < 30"),
    (SEEN_THROUGH, ["core(relations=[c[b_1_0, b_0_0]]; filters=[1]; joins=[]; projections=[0]; "
                    "seen_through=[1])",
                    "core(relations=[r[b_1_0]]; filters=[]; joins=[]; projections=[1])"],
     None),
], ids=["literal argument", "CTE classification seen through"])
def test_planning_and_the_statement_read_no_text_back(nothing_written_read_back, sql, cores,
                                                      statement):
    parsed = parse(sql, "snowflake")
    assert [c.to_text() for c in parsed.cores] == cores
    tree = parsed.statement()
    if statement is not None:
        assert query.to_duckdb(tree) == statement
    assert "CAST(" in query.to_duckdb(tree) and parsed.duckdb_sql != query.to_duckdb(tree)


def test_a_vendor_shape_is_parsed_once(monkeypatch):
    value = sqlglot.exp.column("v")
    first = shapes.wrap("labels_object", value).sql("duckdb")
    monkeypatch.setattr(shapes, "parse_one", lambda *a, **k: pytest.fail("template parsed again"))
    assert shapes.wrap("labels_object", value).sql("duckdb") == first
    assert shapes.wrap("labels_object", sqlglot.exp.column("w")).sql("duckdb") == first.replace(
        "v", "w")


def test_a_string_literal_partner_is_read_off_the_node():
    sql = "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Is {0} discussed in {1}?', 'price', review))"
    op = parse(sql, "snowflake").ai_ops[0]
    unreadable = dataclasses.replace(op, bindings=tuple(
        dataclasses.replace(b, sql=f"<{b.sql}>") for b in op.bindings))
    assert _filter_partner(op) == _filter_partner(unreadable) == {0}


@pytest.mark.parametrize("response_format", [
    "{'type': 'json', 'schema': {'type': 'object', 'properties': {'s': {'type': 'string'}}}}",
    "TYPE OBJECT(s STRING)",
], ids=["object constant", "TYPE OBJECT"])
def test_the_executor_reads_no_response_format(monkeypatch, response_format):
    op = parse(f"SELECT AI_COMPLETE('m', t, response_format => {response_format}) FROM d",
               "snowflake").ai_ops[0]
    tasks._schema.cache_clear()
    tasks._schema_text.cache_clear()
    monkeypatch.setattr(response_schema, "parse_one", lambda *a, **k: pytest.fail("parsed"))
    monkeypatch.setattr(response_schema, "sql_type_schema", lambda *a: pytest.fail("parsed"))
    assert json.loads(tasks.task_grammar(op).source) == {
        "type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"],
        "additionalProperties": False}


@pytest.mark.parametrize("dialect, sql, duckdb_sql", [
    ("bigquery", "SELECT AI.GENERATE(('About ', name), output_schema => 'city STRING, pop INT64')"
                 " AS g FROM t",
     "SELECT {'city': (quail_ai_0(name) ->> '$.city'), 'pop': TRY(CAST(quail_ai_0(name) -> "
     "'$.pop' AS BIGINT)), 'full_response': quail_ai_0(name), 'status': COALESCE(CASE WHEN "
     f"quail_ai_0(name) IS NULL THEN '{shapes.no_answer_text('bigquery')}' END, concat_ws('; ', "
     "CASE WHEN "
     "TRY(CAST(quail_ai_0(name) -> '$.pop' AS BIGINT)) IS NULL AND CAST(quail_ai_0(name) -> "
     "'$.pop' AS TEXT) <> 'null' THEN 'pop: the answer ' || CAST(quail_ai_0(name) -> '$.pop' AS "
     "TEXT) || ' is not a valid INT64' END))} AS g FROM t"),
    ("databricks", "SELECT ai_extract(body, array('person', 'place')) AS e FROM t",
     "SELECT json_transform(quail_ai_0(body), '{\"person\": \"VARCHAR\", \"place\": "
     "\"VARCHAR\"}') AS e FROM t"),
], ids=["BigQuery output_schema", "Databricks ai_extract labels"])
def test_a_shape_of_a_calls_own_fields_is_built_as_a_tree(monkeypatch, dialect, sql,
                                                          duckdb_sql):
    """A vendor shape made of the call's field names is a tree around the slot: no template
    text is assembled from the names and parsed (only the fixed SHAPES templates are). The
    user's schema text is read as a type, so parse_one itself is not refused here."""
    refuse_written_text(monkeypatch)
    template = shapes._template

    def fixed_only(text):
        assert text in {*shapes.SHAPES.values(), shapes.DETAILS_REBUILT}, text
        return template(text)
    monkeypatch.setattr(shapes, "_template", fixed_only)
    assert parse(sql, dialect).duckdb_sql == duckdb_sql


@pytest.mark.parametrize("response_format, schema", [
    ("TYPE OBJECT(s STRING)", {"type": "object", "properties": {"s": {"type": "string"}},
                               "required": ["s"], "additionalProperties": False}),
    ("{'type': 'json'}", {"type": "object"}),
    ("{'type': 'json', 'schema': {'type': 'object', 'properties': {'n': {'type': 'integer'}}}}",
     {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
      "additionalProperties": False}),
], ids=["TYPE OBJECT", "any object", "object constant"])
def test_a_response_format_is_read_off_its_tree(nothing_written_read_back, response_format,
                                                schema):
    """Snowflake's response_format is kept as its text for round trips (`task_args`); the
    schema is read from the argument's node, not from that text parsed again."""
    op = parse(f"SELECT AI_COMPLETE('m', t, response_format => {response_format}) FROM d",
               "snowflake").ai_ops[0]
    assert op.schema == schema
    text = dict(op.task_args)["response_format"]
    assert any(text in written for written in nothing_written_read_back.written)


@pytest.mark.parametrize("dialect, call", [
    ("databricks", "ai_query('e', t, returnType => 'STRING')"),
    ("snowflake", "AI_COMPLETE('m', t)"),
], ids=["a STRING return type", "no response format"])
def test_the_executor_reads_nothing_again_for_free_text(monkeypatch, dialect, call):
    """The front end marks an answer it found no schema for as free text, so the executor
    does not read the call's arguments (a return type's text) again to find that out."""
    op = parse(f"SELECT {call} FROM d", dialect).ai_ops[0]
    tasks._schema.cache_clear()
    tasks._schema_text.cache_clear()
    monkeypatch.setattr(tasks, "json_schema", lambda *a: pytest.fail("read again"))
    assert tasks.task_grammar(op) is None


# the CTE cannot be seen through (its LIMIT): the outer relation's scan runs the CTE, and with
# it the classification, inside DuckDB
SCAN_CALLS = ("WITH c AS (SELECT r.id, r.review, AI_CLASSIFY(r.review, ['widget', 'gadget'])"
              ":labels[0]::STRING AS kind FROM reviews AS r LIMIT 1000) SELECT c.id FROM c "
              "WHERE AI_FILTER(PROMPT('Is {0} about a battery?', c.review)) AND "
              "c.kind = 'gadget'")


def test_a_scan_that_calls_ai_functions_runs_from_its_tree(nothing_written_read_back):
    parsed = parse(SCAN_CALLS, "snowflake")
    outer = dependency_order(parsed.cores)[-1]
    rel, = outer.relations
    assert rel.calls() == {1} and outer.filters == (0,)
    assert rel.scan_sql == (
        "WITH c AS (SELECT r.id, r.review, QUAIL_AI_1(r.review) AS kind FROM reviews AS r "
        "LIMIT 1000) SELECT c.review AS b_0_0 FROM c AS c WHERE c.kind = 'gadget'")
    con = duckdb.connect()
    con.execute("CREATE TABLE reviews AS SELECT * FROM (VALUES (1, 'a widget'), "
                "(2, 'a gadget battery'), (3, NULL)) AS t(id, review)")
    create_ai_function(con, "quail_ai_1_t", parsed.ai_ops[1],
                       lambda rows: ["gadget" if "gadget" in r[0] else "widget" for r in rows])
    scan = load_scan(con, rel, lambda r: prepare_scan(r, "_t", parsed.group_ops))
    assert scan.columns == ("b_0_0",) and scan.rows == [{"b_0_0": "a gadget battery"}]


@pytest.fixture(scope="module")
def targets_loaded():
    """sqlglot reads some of a dialect's own templates the first time the dialect is used."""
    for write in ("bigquery", "databricks"):
        transpile("SELECT AI_CLASSIFY(body, ['a', 'b']) AS c FROM t", "snowflake", write)


@pytest.mark.parametrize("write, form", [
    ("bigquery", "FROM UNNEST([AI.CLASSIFY(body, categories => ['a', 'b'])]) AS quail_v)"),
    ("databricks", "TRANSFORM(ARRAY(ai_classify(body, ARRAY('a', 'b'))), quail_v -> CASE"),
])
def test_a_rebuilt_shape_is_bound_once_on_the_tree(targets_loaded, no_reading_back, write,
                                                    form):
    out = transpile("SELECT AI_CLASSIFY(body, ['a', 'b']) AS c FROM t", "snowflake", write)
    assert form in out, out


EQUI_JOIN = ("SELECT r.id, p.name FROM reviews r JOIN products p ON r.product_id = p.product_id "
             "AND AI_FILTER(PROMPT('Does {0} mention {1}?', r.review, p.name)) "
             "WHERE LOWER(r.lang) = p.lang")


def test_a_joins_equalities_are_trees_from_the_front_end_to_the_plan(nothing_written_read_back):
    from sqlglot import exp

    from quail_engine.plan.build import build_logical
    from quail_engine.plan.nodes import AiJoin, walk
    from quail_engine.plan.rules.equi_pairs import equi_pairs
    from quail_engine.plan.rules.form_ai_join import form_ai_join
    from quail_engine.sql.ir import Equality

    parsed = parse(EQUI_JOIN, "snowflake")
    (core,) = parsed.cores
    equi = parsed.ai_ops[0].join.equi
    assert all(isinstance(e, Equality) and isinstance(e.node, exp.EQ) for e in equi)
    assert [(e.left, e.right, e.sql) for e in equi] == [  # WHERE's conjuncts, then ON's
        ("r", "p", "LOWER(r.lang) = p.lang"), ("r", "p", "r.product_id = p.product_id")]
    assert [k.equality for k in core.keys] == list(equi)
    # the equalities fold into one equijoin, which the AI predicate above it makes its join
    plan = form_ai_join(equi_pairs(build_logical(core, parsed.ai_ops), None), None)
    (join,) = [n for n in walk(plan) if isinstance(n, AiJoin)]
    assert join.equi == equi
    assert join.text() == ("ai_join#0[LOWER(r.lang) = p.lang AND r.product_id = p.product_id]"
                           "(scan(r), scan(p))")


def test_equi_pairs_folds_an_equality_by_its_tree_not_by_an_equals_sign_in_text():
    from quail_engine.plan.nodes import Cross, EquiJoin, Scan, Select
    from quail_engine.plan.rules.equi_pairs import equi_pairs
    from quail_testing.equalities import conjunct, equality

    product = Cross(Scan("a"), Scan("b"))
    sides = frozenset(("a", "b"))
    folded = equi_pairs(Select(product, equality("a.k = b.k"), sides), None)
    assert folded == EquiJoin(Scan("a"), Scan("b"), (equality("a.k = b.k"),))
    not_equal = Select(product, conjunct("a.k >= b.k"), sides)  # holds '=', is no equality
    assert equi_pairs(not_equal, None) is not_equal
