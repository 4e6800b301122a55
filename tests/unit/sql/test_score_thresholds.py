"""A score the SQL compares with numbers carries them (`AiOp.thresholds`): each is a decision
the re-ask band checks, in the SQL's units, converted to P(yes) for the readout."""

import pytest

from quail_engine.exec.prompts import OpPrompt
from quail_engine.sql import parse


@pytest.mark.parametrize("sql,dialect,thresholds", [
    ("SELECT id FROM t WHERE AI.SCORE(('How positive: ', x)) > 0.7", "bigquery", (0.7,)),
    ("SELECT id FROM t WHERE 0.25 <= AI.SCORE(('How positive: ', x))", "bigquery", (0.25,)),
    ("SELECT id FROM t WHERE AI_SIMILARITY(x, 'lamp') BETWEEN -0.2 AND 0.5", "snowflake",
     (-0.2, 0.5)),
    ("SELECT CASE WHEN SNOWFLAKE.CORTEX.SENTIMENT(x) < 0 THEN 'bad' END FROM t", "snowflake",
     (0.0,)),
    ("SELECT AI.SCORE(('How positive: ', x)) AS s FROM t ORDER BY s", "bigquery", ()),
])
def test_the_numbers_a_score_is_compared_with(sql, dialect, thresholds):
    op = parse(sql, dialect).ai_ops[0]
    assert op.thresholds == thresholds


def test_the_readout_gets_them_as_probabilities():
    op = parse("SELECT id FROM t WHERE AI.SCORE(('Rate from 1 to 10 how positive: ', x)) > 7.3",
               "bigquery").ai_ops[0]
    [p] = OpPrompt.for_op(op).readout().thresholds
    assert p == pytest.approx(0.7)  # 1..10: p = (7.3 - 1) / 9
    assert "thresholds=[7.3]" in op.to_text()


def test_a_similaritys_numbers_reach_the_readout_as_span_margins():
    """sql_value maps a similarity's margin m onto -1..1 as -1 + 2 sigmoid(m / spread): the SQL's
    0.5 is the margin spread x logit(0.75), where the re-ask band looks; without a comparison
    no margin is a decision."""
    import math

    from quail_engine.exec.sql_values import SIMILARITY_SPREAD, sql_value
    from quail_engine.infer.api import Answer

    op = parse("SELECT id FROM t WHERE AI_SIMILARITY(x, 'lamp') > 0.5", "snowflake").ai_ops[0]
    [m] = OpPrompt.for_op(op).readout().thresholds
    assert m == pytest.approx(SIMILARITY_SPREAD * math.log(0.75 / 0.25))
    assert sql_value(op, Answer(True, margin=m)) == pytest.approx(0.5)
    plain = parse("SELECT AI_SIMILARITY(x, 'lamp') FROM t", "snowflake").ai_ops[0]
    assert OpPrompt.for_op(plain).readout().thresholds == ()
