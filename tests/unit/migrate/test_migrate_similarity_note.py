"""`quail migrate`'s note on a similarity says what Quail computes since AI_SIMILARITY became
symmetric: the PMI of the two texts read each after the other (two prompts a row), not a
yes/no probability and not a cosine."""

import pytest

from quail_engine.migrate.calls import CompiledNode, find_calls


@pytest.mark.parametrize(("dialect", "sql"), [
    ("snowflake", "select AI_SIMILARITY(a, b) from r"),
    ("databricks", "select ai_similarity(a, b) from r"),
])
def test_a_similaritys_note_says_it_is_the_pmi_both_ways(dialect, sql):
    (call,) = find_calls(CompiledNode("model.p.m", "m.sql", dialect, sql, None))
    assert call.status == "difference"
    assert "PMI of the two texts, each read after the other" in call.note
    assert "two prompts a row" in call.note and "yes/no" not in call.note
