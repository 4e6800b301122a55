"""Each AI call of a compiled node, its IR operator and status: (dialect, SQL) -> expected rows."""

import pytest

from quail_engine.migrate.calls import CompiledNode, find_calls

CASES = [
    ("snowflake", "select AI_CLASSIFY(t, ['a', 'b']):labels[0]::string as x from r",
     [("AI_CLASSIFY", "ai_classify", "unchanged")]),
    ("snowflake", "select id from r where AI_FILTER(PROMPT('Is {0} ok?', t))",
     [("AI_FILTER", "ai_filter", "unchanged")]),
    ("snowflake", "select r.id from r join s on AI_FILTER(PROMPT('{0} or {1}', r.t, s.u))",
     [("AI_FILTER", "ai_join", "unchanged")]),
    ("snowflake", "select AI_COMPLETE('llama3.1-8b', t, {'max_tokens': 12}) from r",
     [("AI_COMPLETE", "ai_generate", "difference")]),
    ("snowflake", "select AI_SENTIMENT(t, ['price']) as a, AI_FILTER(t) as b from r",
     [("AI_SENTIMENT", "ai_classify", "unchanged"), ("AI_FILTER", "ai_filter", "unchanged")]),
    ("snowflake", "select SNOWFLAKE.CORTEX.SENTIMENT(t) from r",
     [("SNOWFLAKE.CORTEX.SENTIMENT", "ai_score", "difference")]),
    ("snowflake", "select AI_EMBED('e5-base-v2', t) from r", [("AI_EMBED", None, "refused")]),
    ("snowflake", "select AI_WHATEVER(t) from r", [("AI_WHATEVER", None, "refused")]),
    ("bigquery", "select AI.IF(('Is ', t, ' urgent?')) as u, AI.CLASSIFY(t, categories => "
                 "['x', 'y']) as c from r",
     [("AI.IF", "ai_filter", "unchanged"), ("AI.CLASSIFY", "ai_classify", "unchanged")]),
    ("bigquery", "select AI.SCORE(('rate ', t)) as s, AI.GENERATE(('title: ', t)).result as g "
                 "from r",
     [("AI.SCORE", "ai_score", "difference"), ("AI.GENERATE", "ai_generate", "difference")]),
    ("databricks", "select ai_classify(t, ARRAY('a', 'b')) as c from r "
                   "where ai_query('ep', concat('Late? ', t)) = 'yes'",
     [("ai_classify", "ai_classify", "unchanged"), ("ai_query", "ai_filter", "difference")]),
    ("databricks", "select ai_parse_document(doc) from r",
     [("ai_parse_document", None, "refused")]),
    ("snowflake", "select id, upper(name) as n from r -- AI_FILTER( in a comment\n", []),
]


@pytest.mark.parametrize(("dialect", "sql", "expected"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_calls_and_status(dialect, sql, expected):
    node = CompiledNode("model.p.m", "models/m.sql", dialect, sql, None)
    found = find_calls(node)
    assert [(f.function, f.op_kind, f.status) for f in found] == expected
    assert all(f.node == "model.p.m" and f.path == "models/m.sql" for f in found)
    assert all((f.note == "") == (f.status == "unchanged") for f in found)


def test_a_refusal_names_the_documented_rewrite():
    node = CompiledNode("model.p.m", "m.sql", "snowflake",
                        "select SNOWFLAKE.CORTEX.COMPLETE('m', [{'role': 'assistant', "
                        "'content': t}]) from r", None)
    (call,) = find_calls(node)
    assert call.status == "refused"
    assert "rewrite: end the conversation with the user's message" in call.note


def test_a_nested_call_refuses_both_calls_and_keeps_the_others():
    sql = ("select AI_COMPLETE('m', AI_COMPLETE('m', t)) as a, AI_CLASSIFY(t, ['x', 'y']) as b "
           "from r")
    found = find_calls(CompiledNode("model.p.m", "m.sql", "snowflake", sql, None))
    assert [f.status for f in found] == ["refused", "refused", "unchanged"]
    assert "compute it in a CTE first" in found[0].note


def test_an_ai_call_in_a_data_test_moves_like_a_model_s():
    node = CompiledNode("test.p.t", "tests/t.sql", "snowflake",
                        "select * from r where AI_FILTER(PROMPT('Bad? {0}', t))", None)
    (call,) = find_calls(node, "test")
    assert (call.op_kind, call.status) == ("ai_filter", "unchanged")


def test_an_ai_call_in_a_snapshot_is_refused_with_its_rewrite():
    node = CompiledNode("snapshot.p.s", "snapshots/s.sql", "bigquery",
                        "select id, AI.CLASSIFY(t, categories => ['a', 'b']) as c from r", None)
    (call,) = find_calls(node, "snapshot")
    assert call.status == "refused" and call.op_kind is None
    assert "snapshot that model" in call.note


def test_a_difference_names_the_model_the_call_asked_for():
    node = CompiledNode("model.p.m", "m.sql", "snowflake",
                        "select AI_COMPLETE('llama3.1-8b', t, {'max_tokens': 12}) from r", None)
    (call,) = find_calls(node)
    assert "'llama3.1-8b'" in call.note and "at most 12 new tokens" in call.note


def test_a_node_that_did_not_compile_has_no_calls():
    assert find_calls(CompiledNode("model.p.m", "m.sql", "snowflake", None, "boom")) == []


@pytest.mark.parametrize(("dialect", "sql", "words"), [
    ("bigquery", "select AI.SCORE(('Rate urgency from 1 to 10: ', t)) from r",
     "placed on the 1-10 scale the prompt states"),
    ("bigquery", "select AI.SCORE(('How urgent is this? ', t)) from r",
     "in 0..1 (the prompt states no scale)"),
    ("snowflake", "select AI_CLASSIFY(t, ['a', 'b'], {'output_mode': 'multi'}) from r",
     "multi-label: one decision per label"),
])
def test_a_difference_note_says_what_quail_answers(dialect, sql, words):
    (call,) = find_calls(CompiledNode("model.p.m", "m.sql", dialect, sql, None))
    assert call.status == "difference" and words in call.note
