"""Score scales a prompt states (sql/scales.py) and AI_SENTIMENT with aspect categories."""

import pytest

from quail_engine.exec.sql_values import probability, sql_value
from quail_engine.infer.api import Answer
from quail_engine.sql.query import parse as parse_query
from quail_engine.sql.scales import parse, range_text, stated_range


@pytest.mark.parametrize("text,scale", [
    ("Rate from 1 to 10 how positive this is: ", (1, 10)),
    ("Give a score between 0 and 100 for urgency", (0, 100)),
    ("On a scale of 1-5, how angry is the customer?", (1, 5)),
    ("Use a 0 to 10 scale.", (0, 10)),
    ("How relevant (1-7) is this?", (1, 7)),
    ("Rate it 1-10", (1, 10)),
    ("Rate how positive this is", None),
    ("Compare 3 products from 2020 to 2019", None),  # not increasing: no scale
])
def test_a_prompt_states_its_scale(text, scale):
    assert stated_range(text) == (None if scale is None else tuple(map(float, scale)))


def test_ai_score_answers_on_the_stated_scale_and_reads_thresholds_back():
    (op,) = parse_query("SELECT AI.SCORE(('Rate from 1 to 10 how positive this is: ', body)) "
                        "AS s FROM docs", "bigquery").ai_ops
    assert dict(op.task_args)["range"] == "1..10" == range_text(1.0, 10.0)
    assert sql_value(op, Answer(value=0.0)) == 1.0 and sql_value(op, Answer(value=1.0)) == 10.0
    assert probability(op, 5.5) == pytest.approx(0.5)
    (plain,) = parse_query("SELECT AI.SCORE(('Rate how positive this is: ', body)) AS s "
                           "FROM docs", "bigquery").ai_ops
    assert "range" not in dict(plain.task_args) and sql_value(plain, Answer(value=0.25)) == 0.25
    assert parse(None) == (0.0, 1.0) and parse("-1..1") == (-1.0, 1.0)


def test_ai_sentiment_with_aspects_is_one_json_operator_and_its_limits_hold():
    """AI_SENTIMENT(text, categories): one classify operator answering the vendor's whole
    {"categories": [...]} object (exec asks each aspect after the same document); more than
    10 aspects, or one longer than 30 characters, is refused as Snowflake refuses it."""
    from quail_engine.sql.errors import SqlError

    (op,) = parse_query("SELECT AI_SENTIMENT(body, ['price', 'quality']) FROM t",
                        "snowflake", runnable=False).ai_ops
    assert op.output_type == "JSON" and dict(op.task_args)["aspects"] == '["price", "quality"]'
    many = ", ".join(f"'a{i}'" for i in range(11))
    for aspects in (many, "'" + "x" * 31 + "'"):
        with pytest.raises(SqlError, match="categories"):
            parse_query(f"SELECT AI_SENTIMENT(body, [{aspects}]) FROM t", "snowflake",
                        runnable=False)
