"""Which models go to the AI executor: every vendor spelling does, plain SQL (even SQL that
mentions an AI function in a comment or a string) does not."""

import pytest

from dbt.adapters.quail.sql_routing import has_ai_functions

_CASES = [
    ("select AI_CLASSIFY(t, ['a', 'b']):labels[0] from r", True),
    ("select * from r where AI_FILTER(PROMPT('is {0} ok?', t))", True),
    ("select snowflake.cortex.sentiment(t) from r", True),
    ("select SNOWFLAKE.CORTEX.COMPLETE('m', t) from r", True),
    ("select AI.IF(('is ', t, ' ok?')) from r", True),
    ("select ai . score(t) from r", True),
    ("select * from ML.GENERATE_TEXT(MODEL m, TABLE r, STRUCT())", True),
    ("select ai_classify(t, array('yes', 'no')) = 'yes' from r", True),
    ("select ai_query('ep', t) from r", True),
    ("select 1 as id", False),
    ("select ai_count from r", False),
    ("select main_ai(t) from r", False),
    ("select t.ai_filter(1) from r", False),
    ("select 'call ai_filter(x) here' as note", False),
    ("-- ai_classify(t, ['a'])\nselect 1", False),
    ("/* AI.IF(x) */ select 1", False),
    ("select 'it''s ai_filter(' as s, prompt_text from r", False),
]


@pytest.mark.parametrize(("sql", "expected"), _CASES)
def test_routes_only_ai_sql_to_the_executor(sql, expected):
    assert has_ai_functions(sql) is expected
