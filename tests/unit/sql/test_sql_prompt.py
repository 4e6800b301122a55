"""Prompt normalisation: every spelling gives one template with slots numbered by first use,
and `render_prompt` fills them as the executor will."""

import pytest

from quail_engine.sql import parse, render_prompt
from quail_engine.sql.prompt import template_parts

SPELLINGS = [
    # (dialect, prompt argument of a filter) -> all mean "Is {review} about {name}?"
    ("snowflake", "PROMPT('Is {0} about {1}?', review, name)"),
    ("snowflake", "PROMPT('Is {1} about {0}?', name, review)"),
    ("snowflake", "'Is ' || review || ' about ' || name || '?'"),
    ("snowflake", "CONCAT('Is ', review, ' about ', name, '?')"),
    ("bigquery", "('Is ', review, ' about ', name, '?')"),
    ("bigquery", "CONCAT('Is ', review, ' about ', name, '?')"),
    ("databricks", "concat('Is ', review, ' about ', name, '?')"),
    ("duckdb", "prompt('Is {0} about {1}?', review, name)"),
    ("duckdb", "'Is ' || review || ' about ' || name || '?'"),
]
FILTER = {"snowflake": "AI_FILTER({})", "bigquery": "AI.IF({})",
          "databricks": "ai_classify({}, ARRAY('yes', 'no')) = 'yes'", "duckdb": "ai_filter({})"}


@pytest.mark.parametrize(("dialect", "prompt"), SPELLINGS)
def test_spellings_normalise_to_one_template(dialect, prompt):
    (op,) = parse(f"SELECT * FROM t WHERE {FILTER[dialect].format(prompt)}", dialect).ai_ops
    assert op.op == "ai_filter"
    assert op.template == "Is {0} about {1}?"
    assert [b.column for b in op.bindings] == ["review", "name"]
    assert render_prompt(op, ["the soup", "food"]) == "Is the soup about food?"


def test_repeated_argument_is_one_binding():
    (op,) = parse("SELECT * FROM t WHERE AI.IF((a, ' or ', a, '?'))", "bigquery").ai_ops
    assert op.template == "{0} or {0}?"
    assert len(op.bindings) == 1
    assert render_prompt(op, ["x"]) == "x or x?"


def test_expression_binding_keeps_its_sql():
    (op,) = parse("SELECT AI_FILTER('Loud? ' || UPPER(r.review)) FROM reviews r",
                  "snowflake").ai_ops
    (b,) = op.bindings
    assert (b.sql, b.alias, b.column) == ("UPPER(r.review)", "r", None)


def test_unqualified_column_resolves_to_the_only_relation():
    (op,) = parse("SELECT AI_FILTER(review) FROM reviews AS r", "snowflake").ai_ops
    assert op.bindings[0].alias == "r"


def test_render_rejects_wrong_value_count_and_renders_null_empty():
    (op,) = parse("SELECT ai_filter('A {0} B {1}', x, y) FROM t", "duckdb").ai_ops
    with pytest.raises(ValueError, match="2 bindings, got 1"):
        render_prompt(op, ["only one"])
    assert render_prompt(op, [None, "y"]) == "A  B y"


def test_template_parts_split_text_and_slots():
    assert template_parts("Is {0} about {1}?") == ["Is ", 0, " about ", 1, "?"]
    assert template_parts("{0}") == [0]
