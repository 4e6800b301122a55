"""The report table and the exit status a user scripts against."""

from quail_engine.migrate.calls import CompiledNode, FoundCall
from quail_engine.migrate.report import Migration, node_label, render

NODE = CompiledNode("model.shop.topics", "models/topics.sql", "snowflake", "select 1", None)
BROKEN = CompiledNode("model.shop.odd", "models/odd.sql", "snowflake", None,
                      "Compilation Error: 'x' is undefined")


def _call(status, note=""):
    return FoundCall("model.shop.topics", "models/topics.sql", "AI_CLASSIFY", "AI_CLASSIFY(t, l)",
                     None if status == "refused" else "ai_classify", status, note)


def test_every_call_is_a_row_and_the_summary_counts_them():
    m = Migration("snowflake", "given by --from", (NODE,),
                  (_call("unchanged"), _call("difference", "greedy decoding")))
    lines = render(m)
    assert lines[0].split() == ["node", "function", "IR", "operator", "status", "note"]
    assert lines[1].split()[:4] == ["topics", "AI_CLASSIFY", "ai_classify", "moves"]
    assert lines[2].endswith("greedy decoding")
    assert "1 moves unchanged, 1 moves with a documented difference, 0 are refused" in lines[-1]
    assert m.exit_status() == 0


def test_a_refusal_or_a_node_that_does_not_compile_is_exit_1():
    assert Migration("snowflake", "", (NODE,), (_call("refused", "no"),)).exit_status() == 1
    m = Migration("snowflake", "", (NODE, BROKEN), (_call("unchanged"),))
    assert m.exit_status() == 1
    assert any(line.startswith("odd") and "does not compile" in line for line in render(m))


def test_node_labels():
    assert node_label("model.shop.review_topics") == "review_topics"
    assert node_label("test.shop.not_null_x.abc123") == "test:not_null_x.abc123"
    assert node_label("snapshot.shop.orders") == "snapshot:orders"
