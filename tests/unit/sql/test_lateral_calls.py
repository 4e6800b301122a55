"""An AI call in the input of a lateral source (Snowflake's LATERAL FLATTEN, BigQuery's UNNEST in
FROM, Databricks' LATERAL VIEW explode) is a projection of the core over the relation it reads,
as one in the select list is; `quail explain` shows it. It ran row by row inside DuckDB's lateral
join, unplanned ("[select, unplanned]", "cores: (none)")."""

from __future__ import annotations

import pytest

from quail_engine.cli import main
from quail_engine.sql import parse

LABELS_SF = "['billing', 'shipping', 'quality']"
SCHEMA = ("{'type': 'json', 'schema': {'type': 'object', 'properties': {'tags': {'type': "
          "'array', 'items': {'type': 'string'}}}, 'required': ['tags']}}")

CASES = [
    # (name, dialect, sql, cores as text)
    ("flatten_multi_label", "snowflake",
     f"SELECT t.id, f.value::string AS label FROM docs t, LATERAL FLATTEN(input => "
     f"AI_CLASSIFY(t.body, {LABELS_SF}, {{'output_mode': 'multi'}}):labels) f",
     ["core(relations=[t[b_0_0]]; filters=[]; joins=[]; projections=[0])"]),
    ("flatten_extract", "snowflake",
     "SELECT d.id, f.key, f.value FROM docs d, LATERAL FLATTEN(input => AI_EXTRACT(d.body, "
     "{'name': 'Who?', 'city': 'Where?'}):response) f",
     ["core(relations=[d[b_0_0]]; filters=[]; joins=[]; projections=[0])"]),
    ("flatten_complete_format", "snowflake",
     f"SELECT d.id, f.value::string AS tag FROM docs d, LATERAL FLATTEN(input => "
     f"AI_COMPLETE('m', 'Tags for: ' || d.body, response_format => {SCHEMA}):tags) f",
     ["core(relations=[d[b_0_0]]; filters=[]; joins=[]; projections=[0])"]),
    # an unqualified column in FLATTEN's input reads the other relation (never FLATTEN's own)
    ("flatten_unqualified", "snowflake",
     f"SELECT id, f.value::string AS label FROM docs, LATERAL FLATTEN(input => "
     f"AI_CLASSIFY(body, {LABELS_SF}, {{'output_mode': 'multi'}}):labels) f",
     ["core(relations=[docs[b_0_0]]; filters=[]; joins=[]; projections=[0])"]),
    ("flatten_outer_with_filter", "snowflake",
     f"SELECT t.id, f.value FROM docs t, LATERAL FLATTEN(input => AI_CLASSIFY(t.body, "
     f"{LABELS_SF}, {{'output_mode': 'multi'}}):labels, outer => TRUE) f "
     f"WHERE AI_FILTER(t.body) AND t.id > 1",
     ["core(relations=[t[b_1_0, b_0_0]]; filters=[1]; joins=[]; projections=[0])"]),
    ("bigquery_unnest", "bigquery",
     "SELECT t.id, label FROM docs t, UNNEST(AI.CLASSIFY(t.body, ['billing', 'shipping'], "
     "output_mode => 'multi')) AS label",
     ["core(relations=[t[b_0_0]]; filters=[]; joins=[]; projections=[0])"]),
    ("databricks_lateral_view_explode", "databricks",
     "SELECT t.id, label FROM docs t LATERAL VIEW explode(from_json(ai_classify(t.body, "
     "'[\"billing\", \"shipping\"]', map('multilabel', 'true')):response, 'array<string>')) "
     "x AS label",
     ["core(relations=[t[b_0_0]]; filters=[]; joins=[]; projections=[0])"]),
    # a select-list call's unqualified column beside an unnesting: FLATTEN's columns are SEQ ...
    # THIS and an UNNEST's its alias, so `body` is the docs' (it had two relations to come from)
    ("select_list_unqualified_beside_flatten", "snowflake",
     f"SELECT AI_CLASSIFY(body, {LABELS_SF}):labels[0]::string AS c, f.value FROM docs, "
     f"LATERAL FLATTEN(input => docs.tags) f",
     ["core(relations=[docs[b_0_0]]; filters=[]; joins=[]; projections=[0])"]),
    ("select_list_unqualified_beside_unnest", "bigquery",
     "SELECT AI.CLASSIFY(body, ['billing', 'shipping']) AS c, tag FROM docs, "
     "UNNEST(docs.tags) AS tag",
     ["core(relations=[docs[b_0_0]]; filters=[]; joins=[]; projections=[0])"]),
    # ... but FLATTEN's own `value`, or a column two tables may hold, stays DuckDB's
    ("select_list_unqualified_flatten_column", "snowflake",
     f"SELECT AI_CLASSIFY(value::string, {LABELS_SF}) AS c FROM docs, "
     f"LATERAL FLATTEN(input => docs.tags) f",
     []),
    ("select_list_unqualified_two_tables", "snowflake",
     f"SELECT AI_CLASSIFY(body, {LABELS_SF}) AS c FROM docs, tags, "
     f"LATERAL FLATTEN(input => docs.tags) f",
     []),
    # a call over the lateral's own column is asked per element: DuckDB's
    ("call_over_the_flattened_value", "snowflake",
     "SELECT t.id FROM docs t, LATERAL FLATTEN(input => PARSE_JSON(t.j)) f "
     "WHERE AI_FILTER(f.value::string)",
     []),
    # a call over two relations: asked of the pairs DuckDB forms
    ("call_over_two_relations", "snowflake",
     f"SELECT t.id FROM docs t, tags g, LATERAL FLATTEN(input => AI_CLASSIFY(t.body || g.name, "
     f"{LABELS_SF}, {{'output_mode': 'multi'}}):labels) f",
     []),
    # the lateral subquery's own `t`: its core, not the outer one
    ("shadowed_alias", "duckdb",
     "SELECT t.id, s.x FROM docs t, LATERAL (SELECT ai_filter('Good? {0}', t.body) AS x "
     "FROM docs AS t) s",
     ["core(relations=[t[b_0_0]]; filters=[]; joins=[]; projections=[0])"]),
]


@pytest.mark.parametrize(("name", "dialect", "sql", "cores"), CASES, ids=[c[0] for c in CASES])
def test_lateral_input_calls_are_projections(name, dialect, sql, cores):
    assert [c.to_text() for c in parse(sql, dialect).cores] == cores


def test_explain_shows_the_flatten_input_as_a_planned_operator(capsys):
    assert main(["explain", "-e", CASES[0][2], "--dialect", "snowflake"]) == 0
    out = capsys.readouterr().out
    assert "#0 [select] ai_classify(" in out and "unplanned" not in out
    assert "projections=[0]" in out
    # DuckDB still unnests what the function returns, one row per label
    assert "UNNEST(quail_ai_0(t.body))" in out
