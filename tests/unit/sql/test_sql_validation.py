"""Values checked when a query is read: every option's type and range, labels, JSON, nesting,
and the length of what an error quotes. Each refusal is one line naming the function and the
option and quoting the value; no input ends in a traceback."""

import pytest

from quail_engine.errors import MESSAGE_LIMIT, SqlError, shorten
from quail_engine.sql import parse, transpile
from quail_engine.sql.errors import ArgumentError, UnsupportedPositionError

REFUSED = [
    # (dialect, sql, words the one-line message must contain)
    ("duckdb", "SELECT ai_filter(review, selectivity := 'x') FROM t",
     "AI_FILTER: option selectivity must be a number in (0, 1], got 'x'"),
    ("duckdb", "SELECT ai_filter(review, selectivity := 7.5) FROM t", "got 7.5"),
    ("duckdb", "SELECT ai_filter(review, selectivity := 0) FROM t", "selectivity"),
    ("duckdb", "SELECT ai_filter(review, selectivity := 1" + "0" * 400 + ") FROM t",
     "selectivity must be a number"),
    ("duckdb", "SELECT ai_generate(review, temperature := [NULL]) FROM t",
     "option temperature must be a number in [0, 2], got [NULL]"),
    ("duckdb", "SELECT ai_generate(review, temperature := -1) FROM t", "temperature"),
    ("duckdb", "SELECT ai_generate(review, max_tokens := 0) FROM t",
     "max_tokens must be an integer in [1, 1000000], got 0"),
    ("duckdb", "SELECT ai_generate(review, max_tokens := 2.5) FROM t", "got 2.5"),
    ("duckdb", "SELECT ai_generate(review, top_p := 'high') FROM t", "top_p"),
    ("duckdb", "SELECT ai_generate(review, stop := [1, 2]) FROM t", "option stop"),
    ("duckdb", "SELECT ai_filter(review, on_error := 'boom') FROM t",
     "on_error must be one of null, fail, details, got 'boom'"),
    ("duckdb", "SELECT ai_filter(review, order := 'random') FROM t", "as_written"),
    ("duckdb", "SELECT ai_filter(review, model := 5) FROM t", "option model"),
    ("duckdb", "SELECT ai_generate(review, task := 'dance') FROM t", "option task"),
    ("duckdb", "SELECT ai_generate(review, output_type := 'BLOB') FROM t", "output_type"),
    ("duckdb", "SELECT ai_filter(review, multi := 'maybe') FROM t", "multi"),
    ("duckdb", "SELECT ai_filter(review, selectivty := 0.1) FROM t",
     "has no option 'selectivty'"),
    ("duckdb", "SELECT ai_filter(review, model := 'a', model := 'b') FROM t", "given twice"),
    ("duckdb", "SELECT ai_classify(review, ['a', 'b'], labels := ['c']) FROM t",
     "labels given twice"),
    ("duckdb", "SELECT ai_aggregate(review, 'x', instruction := 'y') FROM t",
     "instruction given twice"),
    ("duckdb", "SELECT ai_classify(review, ['a', 'a']) FROM t", "label 'a' is listed twice"),
    ("duckdb", "SELECT ai_classify(review, ['a', '']) FROM t", "label name"),
    ("duckdb", "SELECT ai_classify(review, [{'label': 1}, 'b']) FROM t", "labels (strings)"),
    ("bigquery", "SELECT AI.IF(review, max_error_ratio => 'x') FROM t",
     "AI.IF: option max_error_ratio must be a number in [0, 1], got 'x'"),
    ("bigquery", "SELECT AI.CLASSIFY(review, ['a', 'b'], output_mode => 'many') FROM t",
     "output_mode must be one of single, multi"),
    ("bigquery", "SELECT AI.IF(review, examples => ['x']) FROM t", "examples"),
    ("bigquery", "SELECT AI.GENERATE(review, model_params => JSON '{\"a\":') FROM t",
     "malformed JSON in model_params"),
    ("bigquery", "SELECT AI.GENERATE(review, model_params => JSON '" + "9" * 5000 + "') FROM t",
     "malformed JSON in model_params"),
    ("bigquery", "SELECT AI.GENERATE(review, output_schema => 'a STRING, b') FROM t",
     "output_schema must list 'name TYPE' fields"),
    ("snowflake", "SELECT AI_COMPLETE('m', review, {'temperature': 'hot'}) FROM t",
     "AI_COMPLETE: option temperature"),
    ("snowflake", "SELECT AI_COMPLETE('m', review, PARSE_JSON('{bad')) FROM t",
     "malformed JSON in model_parameters"),
    ("snowflake", "SELECT AI_COMPLETE('m', review, options => 0.5) FROM t",
     "model_parameters must be an object"),
    ("snowflake", "SELECT AI_FILTER(review, return_error_details => 'yes') FROM t",
     "return_error_details must be TRUE or FALSE"),
    ("snowflake", "SELECT AI_CLASSIFY(review, ['a', 'b'], {'examples': 'x'}) FROM t",
     "examples"),
    ("snowflake", "SELECT AI_CLASSIFY(review, ['a', 'b'], {'output_mode': 5}) FROM t",
     "output_mode"),
    ("databricks", "SELECT ai_extract(review, '{\"type\": \"object\"') FROM t",
     "malformed JSON in the schema"),
    ("databricks", "SELECT ai_query('ep', review, failOnError => 'sometimes') FROM t",
     "failOnError must be TRUE or FALSE"),
    ("databricks", "SELECT ai_summarize(review, 'short') FROM t",
     "max_words must be an integer"),
    ("databricks", "SELECT ai_classify(review, '[\"a\",') FROM t", "malformed JSON"),
]


@pytest.mark.parametrize(("dialect", "sql", "words"), REFUSED,
                         ids=[f"{d}-{i}" for i, (d, _, _) in enumerate(REFUSED)])
def test_bad_values_are_refused_when_read(dialect, sql, words):
    with pytest.raises(ArgumentError) as info:
        parse(sql, dialect)
    message = str(info.value)
    assert words in message
    assert "\n" not in message and len(message) <= MESSAGE_LIMIT


ACCEPTED = [
    # (dialect, sql, text the IR node must show)
    ("duckdb", "SELECT ai_filter(review, selectivity := 1) FROM t", "selectivity=1"),
    ("duckdb", "SELECT ai_filter(review, selectivity := '0.25') FROM t", "selectivity=0.25"),
    ("duckdb", "SELECT ai_filter(review, on_error := 'FAIL') FROM t", "on_error='fail'"),
    ("duckdb", "SELECT ai_filter(review, selectivity := NULL) FROM t", "-> BOOLEAN"),
    ("duckdb", "SELECT ai_generate(review, stop := '.') FROM t", "stop=('.',)"),
    ("snowflake", "SELECT AI_COMPLETE('m', review, {'max_tokens': '20'}) FROM t",
     "max_tokens=20"),
    ("bigquery", "SELECT AI.GENERATE(review, model_params => JSON '{\"generationConfig\": "
     "{\"maxOutputTokens\": 5, \"temperature\": 0}}') FROM t", "temperature=0"),
]


@pytest.mark.parametrize(("dialect", "sql", "shown"), ACCEPTED,
                         ids=[f"{d}-{i}" for i, (d, _, _) in enumerate(ACCEPTED)])
def test_good_values_are_kept(dialect, sql, shown):
    assert shown in parse(sql, dialect).ai_ops[0].to_text()


def test_a_hint_is_refused_the_same_with_and_without_tables(capsys):
    """`quail explain` must not accept a hint that `explain --table` refuses with a traceback."""
    from quail_engine.cli import main

    sql = "SELECT id FROM reviews WHERE ai_filter(review, selectivity := 7.5)"
    assert main(["explain", "-e", sql]) == 2
    plain = capsys.readouterr().err
    assert main(["explain", "-e", sql, "--table", "reviews=examples/data/reviews.csv"]) == 2
    assert capsys.readouterr().err == plain
    assert "selectivity must be a number in (0, 1], got 7.5" in plain


def test_huge_values_are_quoted_shortened():
    sql = "SELECT ai_filter(review, model := 5, selectivity := '" + "x" * 100_000 + "') FROM t"
    with pytest.raises(ArgumentError) as info:
        parse(sql, "duckdb")
    message = str(info.value)
    assert "\n" not in message and len(message) <= MESSAGE_LIMIT
    assert "characters]" in message


def test_shorten_keeps_head_and_tail_on_one_line():
    text = "SELECT\n  " + "a" * 1000 + " FROM t"
    short = shorten(text, 100)
    assert len(short) <= 100 and "\n" not in short
    assert short.startswith("SELECT a") and short.endswith("aaaa FROM t")
    assert shorten("x  y") == "x y"


@pytest.mark.parametrize("opener,closer", [("(", ")"), ("lower(", ")"), ("[", "]"),
                                           ("CASE WHEN TRUE THEN ", " END"), ("NOT ", ""),
                                           ("(SELECT ", ")")])
def test_nesting_past_the_limit_is_one_line(opener, closer):
    from quail_engine.sql.nesting import MAX_NESTING

    inner = opener * (MAX_NESTING - 1) + "review" + closer * (MAX_NESTING - 1)
    parse(f"SELECT ai_filter({inner}) FROM t", "duckdb")
    transpile(f"SELECT ai_filter({inner}) FROM t", "duckdb", "snowflake")
    deep = opener * 5000 + "review" + closer * 5000
    for run in (lambda: parse(f"SELECT ai_filter({deep}) FROM t", "duckdb"),
                lambda: transpile(f"SELECT {deep} FROM t", "snowflake", "bigquery")):
        with pytest.raises(SqlError, match=f"nested too deeply \\(limit {MAX_NESTING}") as info:
            run()
        assert len(str(info.value)) <= MESSAGE_LIMIT


def test_long_chains_are_not_nesting():
    """`a || b || ...` and `x AND y AND ...` are as deep as they are long in the tree; the
    front end walks them without recursion."""
    chain = " || ".join(["'a'"] * 3000) + " || review"
    assert parse(f"SELECT ai_filter({chain}) FROM t", "snowflake").ai_ops[0].bindings
    conjuncts = " AND ".join(f"id <> {i}" for i in range(3000))
    parsed = parse(f"SELECT id FROM t WHERE ai_filter(review) AND {conjuncts}", "duckdb")
    assert parsed.cores[0].filters == (0,)


def test_recursion_error_becomes_the_nesting_error():
    import sys

    from quail_engine.sql.nesting import nesting_guard

    def dive(n):
        return dive(n + 1)

    before = sys.getrecursionlimit()
    with pytest.raises(SqlError, match="nested too deeply"):
        with nesting_guard("SELECT 1", "duckdb"):
            dive(0)
    assert sys.getrecursionlimit() == before


@pytest.mark.parametrize("dialect,call", [
    ("snowflake", "AI_FILTER(CONCAT('Does the template {0} appear in: ', review))"),
    ("snowflake", "AI_FILTER('Is {2} in: ' || review)"),
    ("bigquery", "AI.IF(('Is {1} in: ', review))"),
    ("databricks", "ai_classify(concat('Is {0} in: ', review), ARRAY('yes', 'no')) = 'yes'"),
    ("duckdb", "ai_filter('Is {0} good?')"),
])
def test_literal_braces_never_bind(dialect, call):
    op = parse(f"SELECT id FROM t WHERE {call}", dialect).ai_ops[0]
    literal = next(b for b in op.bindings if b.sql.startswith("'"))
    assert "{" in literal.sql and "review" not in literal.sql
    for target in ("snowflake", "bigquery", "databricks", "duckdb"):
        again = parse(transpile(f"SELECT id FROM t WHERE {call}", dialect, target), target)
        assert [b.sql for b in again.ai_ops[0].bindings] == [b.sql for b in op.bindings]


def test_task_text_from_values_is_not_a_placeholder():
    out = transpile("SELECT ai_generate(review, task := 'translate', source_language := '{2}', "
                    "target_language := 'fr') FROM t", "duckdb", "bigquery")
    assert "from {2} to fr" in out


def test_table_functions_outside_from_are_refused():
    with pytest.raises(UnsupportedPositionError, match="table function"):
        parse("SELECT ML.GENERATE_TEXT(review) FROM t", "bigquery")
    with pytest.raises(SqlError, match="output_schema"):
        parse("SELECT * FROM AI.GENERATE_TABLE(MODEL m, TABLE t)", "bigquery")


@pytest.mark.parametrize("sql", ["SELECT ai_classify(review, '[\"a\"]', map('x', 'y', 'z')) FROM t",
                                 "SELECT AI_FILTER(review, {: 'x'}) FROM t"])
def test_sqlglot_builder_failures_are_parse_errors(sql):
    with pytest.raises(SqlError, match="cannot parse the SQL"):
        parse(sql, "databricks" if "map" in sql else "snowflake")


@pytest.mark.parametrize("chain", ["x" + "[1]" * 5000, ".".join(["a"] * 5000),
                                   "x" + "::INT" * 5000, "x" + " IS NOT NULL" * 3000])
def test_operator_chains_past_the_limit_are_one_line(chain):
    with pytest.raises(SqlError, match="nested too deeply") as info:
        parse(f"SELECT {chain} FROM t WHERE ai_filter(x)", "duckdb")
    assert "\n" not in str(info.value) and len(str(info.value)) <= MESSAGE_LIMIT


def test_deep_json_in_an_option_is_refused_before_decoding():
    deep = "[" * 50_000 + "]" * 50_000
    with pytest.raises(SqlError, match="nested too deeply"):
        parse(f"SELECT AI_COMPLETE('m', review, PARSE_JSON('{deep}')) FROM t", "snowflake")
