"""Every warehouse AI function in its documented shape: one row per function form and dialect,
run through a real session on the embedded models (CPU), asserting the SQL type and the shape
of the value each row gets (docs/functions.md is the same table in prose).

Budget: ~2-3 minutes on a 2-core CPU (one session, both embedded models loaded once, 2-3 rows
per query, generation capped at a few tokens where the form allows it).
"""

from __future__ import annotations

import datetime
import json
import time

import pyarrow as pa
import pytest

from quail_engine.exec.facade import SessionConfig, open_session

pytestmark = pytest.mark.model

DOCS = [(1, "Alice Smith paid 45 dollars for two lamps in Paris.", "g"),
        (2, "The blender broke after two days; Bob wants a refund.", "g")]
LABELS = {"a", "b"}
SENTIMENTS = {"positive", "negative", "neutral", "mixed", "unknown"}
SHORT = {"max_tokens": 8}


def _json(v):
    return json.loads(v) if isinstance(v, str) else v


def is_text(v):
    return isinstance(v, str)


def is_bool(v):
    return isinstance(v, bool)


def in_range(low, high):
    return lambda v: isinstance(v, float) and low <= v <= high


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_float(v):
    return isinstance(v, float)


def label_in(labels):
    return lambda v: v in labels


def json_keys(*keys, inner=None):
    """A JSON object with exactly `keys`; `inner(obj)` checks its values."""
    def check(v):
        obj = _json(v)
        return isinstance(obj, dict) and set(obj) == set(keys) and (inner is None or inner(obj))
    return check


NONE = type(None)


def keeps_the_text(v):
    """A mask's answer: the document's own words, some of them [MASKED], none dropped for good
    (the embedded writer's rewrite gave 'MASKED.')."""
    words = {w for _, body, _ in DOCS for w in body.split()}
    kept = v.replace("[MASKED]", " ").split() if is_text(v) else []
    return len(kept) >= 5 and set(kept) <= words


def extraction(*fields, types=(str, NONE)):
    return lambda obj: (set(obj["response"]) == set(fields)
                        and all(isinstance(x, types) for x in obj["response"].values()))


CASES = [
    # (dialect, the expression over docs(id, body, grp), check of each row's value)
    ("snowflake", "AI_FILTER(PROMPT('Is {0} about money?', body))", is_bool),
    ("snowflake", "AI_CLASSIFY(body, ['a', 'b'])",
     json_keys("labels", inner=lambda o: len(o["labels"]) == 1 and o["labels"][0] in LABELS)),
    ("snowflake", "AI_CLASSIFY(body, ['a', 'b']):labels[0]::string", label_in(LABELS)),
    ("snowflake", "AI_SENTIMENT(body, ['price', 'quality'])",
     json_keys("categories", inner=lambda o: [c["name"] for c in o["categories"]] == [
         "overall", "price", "quality"] and {c["sentiment"] for c in o["categories"]} <= SENTIMENTS)),
    ("snowflake", "AI_SENTIMENT(body)",
     json_keys("categories", inner=lambda o: o["categories"][0]["sentiment"] in SENTIMENTS)),
    ("snowflake", "AI_COMPLETE('llama3.1-8b', body, {'max_tokens': 8})", is_text),
    ("snowflake", "AI_COMPLETE('llama3.1-8b', 'What is the amount in: ' || body, "
                  "response_format => TYPE OBJECT(amount NUMBER))",
     json_keys("amount", inner=lambda o: isinstance(o["amount"], int))),
    ("snowflake", "AI_COMPLETE(model => 'llama3.1-8b', prompt => 'Who is in: ' || body, "
                  "response_format => {'type': 'json', 'schema': {'type': 'object', "
                  "'properties': {'person': {'type': 'string'}}, 'required': ['person']}})",
     json_keys("person", inner=lambda o: isinstance(o["person"], str))),
    ("snowflake", "AI_EXTRACT(body, {'name': 'Who is the person?', 'city': 'Which city?'})",
     json_keys("response", "error", inner=extraction("name", "city"))),
    ("snowflake", "AI_EXTRACT(body, {'name': 'Who is the person?'}):response:name::string",
     lambda v: v is None or isinstance(v, str)),
    ("snowflake", "AI_EXTRACT(text => body, responseFormat => {'schema': {'type': 'object', "
                  "'properties': {'amount': {'type': 'number'}}}})",
     json_keys("response", "error",
               inner=extraction("amount", types=(int, float, NONE)))),
    ("snowflake", "AI_TRANSLATE(body, 'en', 'de')", is_text),
    ("snowflake", "AI_SIMILARITY(body, 'money')", in_range(-1.0, 1.0)),
    ("snowflake", "AI_COUNT_TOKENS('ai_complete', 'llama3.1-8b', body)", is_int),
    ("snowflake", "AI_COUNT_TOKENS('ai_sentiment', body)", is_int),
    ("snowflake", "SNOWFLAKE.CORTEX.SENTIMENT(body)", in_range(-1.0, 1.0)),
    ("snowflake", "SNOWFLAKE.CORTEX.CLASSIFY_TEXT(body, ['a', 'b'])",
     json_keys("label", inner=lambda o: o["label"] in LABELS)),
    ("snowflake", "SNOWFLAKE.CORTEX.EXTRACT_ANSWER(body, 'Who is it about?')",
     lambda v: isinstance(_json(v), list) and set(_json(v)[0]) == {"answer"}),
    ("snowflake", "SNOWFLAKE.CORTEX.SUMMARIZE(body)", is_text),
    ("bigquery", "AI.IF(('Is this about money? ', body))", is_bool),
    ("bigquery", "AI.CLASSIFY(body, ['a', 'b'])", label_in(LABELS)),
    ("bigquery", "AI.CLASSIFY(body, ['a', 'b'], output_mode => 'multi')",
     lambda v: isinstance(v, list) and set(v) <= LABELS),
    ("bigquery", "AI.SCORE(('Rate how positive this is: ', body))", in_range(0.0, 1.0)),
    ("bigquery", "AI.SCORE(('Rate from 1 to 10 how positive this is: ', body))",
     in_range(1.0, 10.0)),
    ("bigquery", "AI.GENERATE(('Summarize: ', body)).result", is_text),
    ("bigquery", "AI.GENERATE(('Summarize: ', body))",
     lambda v: set(v) == {"result", "full_response", "status"} and is_text(v["result"])),
    ("bigquery", "AI.GENERATE(('Who and how much: ', body), "
                 "output_schema => 'person STRING, amount INT64').amount",
     lambda v: v is None or is_int(v)),
    ("bigquery", "AI.GENERATE_BOOL(('Is this about money? ', body)).result", is_bool),
    ("bigquery", "AI.GENERATE_INT(('How many dollars: ', body)).result", is_int),
    ("bigquery", "AI.GENERATE_DOUBLE(('How many dollars: ', body))",
     lambda v: is_float(v["result"]) and v["status"] == ""),
    ("bigquery", "AI.COUNT_TOKENS(body).result", is_int),
    ("databricks", "ai_query('ep', body, modelParameters => named_struct('max_tokens', 8))",
     is_text),
    ("databricks", "ai_query('ep', 'How many dollars: ' || body, returnType => 'FLOAT')",
     is_float),
    ("databricks", "ai_query('ep', 'Who is in: ' || body, "
                   "responseFormat => 'STRUCT<person: STRING>')",
     json_keys("person", inner=lambda o: isinstance(o["person"], str))),
    ("databricks", "ai_query('ep', body, failOnError => false, "
                   "modelParameters => named_struct('max_tokens', 8))",
     lambda v: set(v) == {"result", "errorMessage"} and is_text(v["result"])),
    ("databricks", "ai_classify(body, array('a', 'b'))", label_in(LABELS)),
    ("databricks", "ai_classify(body, '[\"a\", \"b\"]')",
     json_keys("response", "error_message", inner=lambda o: set(o["response"]) <= LABELS)),
    ("databricks", "ai_extract(body, array('person', 'city'))",
     lambda v: set(v) == {"person", "city"}),
    ("databricks", "ai_extract(body, '{\"person\": {\"type\": \"string\"}}')",
     json_keys("response", "error_message", inner=lambda o: set(o["response"]) == {"person"})),
    ("databricks", "ai_analyze_sentiment(body)", label_in(SENTIMENTS)),
    ("databricks", "ai_summarize(body, 5)", is_text),
    ("databricks", "ai_translate(body, 'de')", is_text),
    ("databricks", "ai_similarity(body, 'money')", in_range(0.0, 1.0)),
    ("databricks", "ai_mask(body, array('person'))", keeps_the_text),
    ("databricks", "ai_fix_grammar(body)", is_text),
    ("duckdb", "ai_filter(body)", is_bool),
    ("duckdb", "ai_classify(body, ['a', 'b'])", label_in(LABELS)),
    ("duckdb", "ai_extract(body, ['person', 'city'])",
     json_keys("person", "city")),
]

AGGREGATES = [
    ("snowflake", "AI_AGG(body, 'Name the common topic')"),
    ("snowflake", "AI_SUMMARIZE_AGG(body)"),
    ("bigquery", "AI.AGG(body, 'Name the common topic')"),
]


@pytest.fixture(scope="module")
def session(require_embedded):
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE docs (id INTEGER, body VARCHAR, grp VARCHAR)")
    con.executemany("INSERT INTO docs VALUES (?, ?, ?)", DOCS)
    return open_session(con, SessionConfig(use_cache=False, precision="fp32"))


@pytest.mark.parametrize("dialect,expr,check", CASES,
                         ids=[f"{d}:{e[:60]}" for d, e, _ in CASES])
def test_function_returns_its_documented_shape(session, dialect, expr, check):
    table = session.execute(f"SELECT id, {expr} AS v FROM docs ORDER BY id", dialect)
    values = table.column("v").to_pylist()
    assert len(values) == len(DOCS)
    for v in values:
        assert check(v), (expr, v, table.schema.field("v").type)


@pytest.mark.parametrize("dialect,expr", AGGREGATES, ids=[e for _, e in AGGREGATES])
def test_aggregate_returns_one_text_per_group(session, dialect, expr):
    table = session.execute(f"SELECT grp, {expr} AS v FROM docs GROUP BY grp", dialect)
    assert table.schema.field("v").type == pa.string()
    assert table.num_rows == 1 and is_text(table.column("v")[0].as_py())


def test_show_details_reports_the_run(session):
    """AI_COMPLETE(..., show_details => TRUE): the vendor's {choices, created, model, usage},
    created the statement's time, usage the prompt's and the answer's token counts."""
    sql = ("SELECT id, AI_COMPLETE(model => 'llama3.1-8b', prompt => body, model_parameters => "
           "{'max_tokens': 8}, show_details => TRUE) AS v, AI_COUNT_TOKENS('ai_complete', "
           "'llama3.1-8b', body) AS n FROM docs ORDER BY id")
    before = int(time.time())
    table = session.execute(sql, "snowflake")
    after = int(time.time())
    for v, n in zip(table.column("v").to_pylist(), table.column("n").to_pylist()):
        obj = _json(v)
        assert set(obj) == {"choices", "created", "model", "usage"}, obj
        assert is_text(obj["choices"][0]["messages"]) and before <= obj["created"] <= after
        assert obj["model"] == "smollm2-135m"  # the embedded writer, not the vendor's name
        usage = obj["usage"]
        assert 1 <= usage["completion_tokens"] <= 8 and usage["prompt_tokens"] > n
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_a_typed_answer_the_model_cannot_finish_is_null_with_a_status(session):
    """AI.GENERATE_INT with one output token for a long answer: the vendor's NULL and a status,
    never an aborted query."""
    sql = ("SELECT id, AI.GENERATE_INT(('Write a long story about: ', body), model_params => "
           "JSON '{\"generation_config\": {\"max_output_tokens\": 1}}') AS v FROM docs")
    for v in session.execute(sql, "bigquery").column("v").to_pylist():
        assert (v["result"] is None) == (v["status"] != ""), v
        assert v["result"] is None or is_int(v["result"])


def no_quotes(v):
    return v is None or is_text(v) and not v.startswith('"')


TYPED = [
    # (dialect, the expression, its Arrow type, check of each row's value): a vendor's typed
    # result is that type in DuckDB, a string field without its JSON quotes
    ("bigquery", "AI.GENERATE(('Give two tags for: ', body), "
                 "output_schema => 'tags ARRAY<STRING>').tags", pa.list_(pa.string()),
     lambda v: v is None or all(no_quotes(x) for x in v)),
    ("bigquery", "AI.GENERATE(('Who: ', body), "
                 "output_schema => 'p STRUCT<name STRING, age INT64>').p",
     pa.struct([("name", pa.string()), ("age", pa.int64())]),
     lambda v: v is None or no_quotes(v["name"])),
    ("bigquery", "AI.GENERATE(('Who: ', body), output_schema => 'p STRUCT<name STRING>').p.name",
     pa.string(), no_quotes),
    ("databricks", "ai_query('ep', 'Give two tags for: ' || body, returnType => 'ARRAY<STRING>')",
     pa.list_(pa.string()), lambda v: v is None or all(no_quotes(x) for x in v)),
    ("databricks", "ai_query('ep', 'When was this written? ' || body, returnType => 'DATE')",
     pa.date32(), lambda v: v is None or isinstance(v, datetime.date)),
]


@pytest.mark.parametrize("dialect,expr,arrow_type,check", TYPED,
                         ids=[f"{d}:{e[-50:]}" for d, e, _, _ in TYPED])
def test_a_typed_result_is_the_vendors_type(session, dialect, expr, arrow_type, check):
    table = session.execute(f"SELECT id, {expr} AS v FROM docs ORDER BY id", dialect)
    assert table.schema.field("v").type == arrow_type
    assert all(check(v) for v in table.column("v").to_pylist()), table.column("v")


@pytest.mark.parametrize("dialect,sql", [
    ("bigquery", "SELECT id, tag FROM docs, UNNEST(AI.GENERATE(('Give two tags for: ', body), "
                 "output_schema => 'tags ARRAY<STRING>').tags) AS tag"),
    ("databricks", "SELECT id, explode(ai_query('ep', 'Give two tags for: ' || body, "
                   "returnType => 'ARRAY<STRING>')) AS tag FROM docs"),
])
def test_an_array_result_unnests_into_its_strings(session, dialect, sql):
    table = session.execute(sql, dialect)
    assert table.schema.field("tag").type == pa.string()
    assert all(no_quotes(v) for v in table.column("tag").to_pylist())


@pytest.mark.parametrize("dialect,expr", [
    ("snowflake", "AI_CLASSIFY(body, ['a', 'b'])"),
    ("snowflake", "AI_FILTER(body)"),
    ("snowflake", "AI_COMPLETE('m', body)"),
    ("snowflake", "AI_COMPLETE('m', body, show_details => TRUE)"),
    ("snowflake", "SNOWFLAKE.CORTEX.EXTRACT_ANSWER(body, 'Who?')"),
    ("databricks", "ai_analyze_sentiment(body)"),
    ("databricks", "ai_classify(body, '[\"a\", \"b\"]')"),
    ("databricks", "ai_classify(body, '[\"a\", \"b\"]', map('multilabel', 'true'))"),
    ("bigquery", "AI.CLASSIFY(body, ['a', 'b'], output_mode => 'single')"),
])
def test_null_and_empty_inputs_are_null_not_an_answer(session, dialect, expr):
    sql = (f"SELECT {expr} AS v FROM (SELECT * FROM (VALUES (1, NULL), (2, ''), (3, '  ')) "
           "AS t(id, body)) ORDER BY id")
    assert session.execute(sql, dialect).column("v").to_pylist() == [None, None, None]


NO_ANSWER = ("no answer: a NULL input, or the model did not complete an answer of the requested "
             "type within max_tokens")
NO_ANSWER_BQ = NO_ANSWER.replace("max_tokens", "max_output_tokens")  # BigQuery's option
BLANK_LITERALS = [  # (dialect, the call with {x} its text, the value of a blank text)
    ("snowflake", "AI_FILTER({x})", None),
    ("snowflake", "AI_FILTER({x} || {x})", None),
    ("snowflake", "AI_CLASSIFY({x}, ['a', 'b'])", None),
    ("snowflake", "AI_CLASSIFY({x}, ['a', 'b'], {{'output_mode': 'multi'}})", None),
    ("snowflake", "AI_COMPLETE('m', {x})", None),
    ("snowflake", "AI_COMPLETE('m', {x}, show_details => TRUE)", None),
    ("snowflake", "AI_EXTRACT({x}, ['What?'])", f'{{"response":null,"error":"{NO_ANSWER}"}}'),
    ("snowflake", "SNOWFLAKE.CORTEX.SENTIMENT({x})", None),
    ("snowflake", "AI_SENTIMENT({x})", None),
    ("snowflake", "AI_SENTIMENT({x}, ['price'])", None),
    ("snowflake", "SNOWFLAKE.CORTEX.CLASSIFY_TEXT({x}, ['a', 'b'])", None),
    ("snowflake", "SNOWFLAKE.CORTEX.EXTRACT_ANSWER({x}, 'Who?')", None),
    ("snowflake", "SNOWFLAKE.CORTEX.SUMMARIZE({x})", None),
    ("snowflake", "AI_TRANSLATE({x}, 'en', 'de')", None),
    ("snowflake", "AI_SIMILARITY({x}, 'money')", None),
    ("bigquery", "AI.IF({x})", None),
    ("bigquery", "AI.SCORE({x})", None),
    ("bigquery", "AI.CLASSIFY({x}, ['a', 'b'])", None),
    ("bigquery", "AI.GENERATE({x})", {"result": None, "full_response": None,
                                   "status": NO_ANSWER_BQ}),
    ("databricks", "ai_query('ep', {x})", None),
    ("databricks", "ai_analyze_sentiment({x})", None),
    ("databricks", "ai_summarize({x})", None),
    ("databricks", "ai_classify({x}, array('a', 'b'))", None),
    ("databricks", "ai_extract({x}, array('person'))", None),
    ("duckdb", "ai_filter({x})", None),
    ("duckdb", "ai_generate({x})", None),
    ("duckdb", "ai_classify({x}, ['a', 'b'])", None),
]


@pytest.mark.parametrize("dialect,call,blank", BLANK_LITERALS,
                         ids=[f"{d}:{c}" for d, c, _ in BLANK_LITERALS])
def test_a_blank_literal_is_answered_as_a_blank_value_is(session, dialect, call, blank):
    """A blank text written as a literal ('' or '  ', which the front end folds into the
    prompt instead of binding it) is no input, as a blank column value is: NULL, or the
    vendor's packaging of NULL, with or without a FROM clause (it was answered: AI_FILTER('')
    FALSE, AI_COMPLETE('m', '') an invented reply, AI_EXTRACT('', ['What?']) 'What?')."""
    literals = ", ".join(f"{call.format(x=x)} AS v{k}" for k, x in enumerate(["''", "'  '"]))
    table = session.execute(f"SELECT {literals}, {call.format(x='body')} AS c FROM (SELECT * "
                            "FROM (VALUES (1, ''), (2, '  ')) AS t(id, body)) ORDER BY id",
                            dialect)
    assert table.to_pylist() == [{"v0": blank, "v1": blank, "c": blank}] * 2
    alone = session.execute(f"SELECT {call.format(x=chr(39) * 2)} AS v", dialect)
    assert alone.column("v").to_pylist() == [blank]


@pytest.mark.parametrize("dialect,call", [
    ("snowflake", "AI_AGG({x}, 'Summarize these reviews')"),
    ("snowflake", "AI_SUMMARIZE_AGG({x})"),
    ("bigquery", "AI.AGG(({x}), 'Summarize these reviews')"),
])
def test_an_aggregate_of_a_constant_is_one_row_per_group(session, dialect, call):
    """An aggregate whose argument is a constant (folded into the prompt, no binding left) is
    still an aggregate: one row per group, not one per input row (it was answered per row)."""
    blank = session.execute(f"SELECT {call.format(x=chr(39) * 2)} AS v FROM docs", dialect)
    assert blank.to_pylist() == [{"v": None}]
    grouped = session.execute(f"SELECT grp, {call.format(x=repr('Good value.'))} AS v "
                              "FROM docs GROUP BY grp", dialect)
    assert grouped.num_rows == len({g for _, _, g in DOCS})
    assert all(is_text(v) for v in grouped.column("v").to_pylist())
    empty = session.execute(f"SELECT {call.format(x=repr('Good value.'))} AS v FROM docs "
                            "WHERE id < 0", dialect)
    assert empty.to_pylist() == [{"v": None}]


SIMILAR = [  # anchor, a text that means the same, texts about something else
    ("comfortable running shoes", "Great shoes, very comfortable",
     ["It is okay, nothing special", "The soup was too salty"]),
    ("The battery dies after two hours.", "Battery life is terrible, it runs out quickly.",
     ["The screen is bright and sharp.", "Delivery was on time."]),
    ("I want a refund.", "Please give me my money back.",
     ["The manual is in French.", "Cats sleep a lot."]),
    ("The customer service was rude.", "The support agent was impolite to me.",
     ["The price was fair.", "The river flows to the sea."]),
]


@pytest.mark.parametrize("dialect,call,low,high", [
    ("snowflake", "AI_SIMILARITY(a, b)", -1.0, 1.0),
    ("databricks", "ai_similarity(a, b)", 0.0, 1.0),
])
def test_similarity_ranks_a_paraphrase_above_unrelated_texts(session, dialect, call, low, high):
    """Against each anchor, the text that means the same scores above every unrelated one (the
    yes/no readout it replaced put 'It is okay, nothing special' at 0.92 above 'Great shoes,
    very comfortable' at 0.87), in the vendor's range."""
    rows = [(i, a, b) for i, (a, same, others) in enumerate(SIMILAR) for b in [same, *others]]
    values = ", ".join(f"({i}, '{a}', '{b}')" for i, a, b in rows)
    sql = f"SELECT i, b, {call} AS s FROM (VALUES {values}) AS t(i, a, b)"
    table = session.execute(sql, dialect)
    scores = {(i, b): s for i, b, s in zip(*(table.column(k).to_pylist() for k in range(3)))}
    for i, (_, same, others) in enumerate(SIMILAR):
        assert all(low <= scores[i, b] <= high for b in [same, *others])
        assert all(scores[i, same] > scores[i, b] for b in others), (i, scores)


@pytest.mark.parametrize("dialect,call,swapped", [
    ("snowflake", "AI_SIMILARITY(a, b)", "AI_SIMILARITY(b, a)"),
    ("databricks", "ai_similarity(a, b)", "ai_similarity(b, a)"),
])
def test_similarity_is_the_same_whichever_text_comes_first(session, dialect, call, swapped):
    """The vendors' cosine is symmetric, so exchanging the arguments gives the same value,
    in one query and in two (each row's two texts are read each after the other and the
    value is the mean of both directions: before, 'comfortable running shoes' against 'Great
    shoes, very comfortable' was 0.80 one way and another number the other)."""
    rows = [(i, a, b) for i, (a, b, _) in enumerate(SIMILAR[:3])]
    values = ", ".join(f"({i}, '{a}', '{b}')" for i, a, b in rows)
    source = f"FROM (VALUES {values}) AS t(i, a, b) ORDER BY i"
    both = session.execute(f"SELECT i, {call} AS ab, {swapped} AS ba {source}", dialect)
    ab, ba = both.column("ab").to_pylist(), both.column("ba").to_pylist()
    # equal up to float32's last digits: the CPU engine sizes its batches by measured speed,
    # and a request batched otherwise can differ in the seventh digit (the two orders
    # differed by ~0.03 before)
    assert None not in ab and ba == pytest.approx(ab, abs=1e-5), (ab, ba)
    alone = session.execute(f"SELECT i, {swapped} AS ba {source}", dialect)
    assert alone.column("ba").to_pylist() == pytest.approx(ab, abs=1e-5)
