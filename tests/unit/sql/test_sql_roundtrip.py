"""Round trips: parse -> emit in every dialect -> parse gives the same IR; refused and lossy
pairs fail with a named reason or log the documented difference."""

import dataclasses
import logging

import pytest

from quail_engine.errors import UnsupportedError
from quail_engine.sql import parse, transpile
from quail_engine.sql.ir import OpKind

DIALECTS = ("snowflake", "bigquery", "databricks", "duckdb")

QUERIES = {
    "sf_filter": ("snowflake", "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Is {0} positive?', "
                  "review))"),
    "sf_concat_filter": ("snowflake", "SELECT id FROM reviews WHERE AI_FILTER('Is it good? ' || "
                         "review)"),
    "sf_classify": ("snowflake", "SELECT AI_CLASSIFY(review, ['positive', 'negative'])"
                    ":labels[0]::STRING AS s FROM reviews"),
    "sf_classify_multi": ("snowflake", "SELECT AI_CLASSIFY(review, ['a', 'b', 'c'], "
                          "{'output_mode': 'multi'}):labels AS s FROM reviews"),
    "sf_classify_described": ("snowflake", "SELECT AI_CLASSIFY(review, [{'label': 'bug', "
                              "'description': 'a defect'}, {'label': 'praise', 'description': "
                              "'a compliment'}]):labels[0]::STRING FROM reviews"),
    "sf_join": ("snowflake", "SELECT * FROM reviews r JOIN products p ON r.product_id = "
                "p.product_id AND AI_FILTER(PROMPT('Does {0} mention {1}?', r.review, p.name))"),
    "sf_complete": ("snowflake", "SELECT AI_COMPLETE('llama3.1-8b', PROMPT('Summarize {0}', "
                    "review), {'max_tokens': 20}) FROM reviews"),
    "sf_complete_typed": ("snowflake", "SELECT AI_COMPLETE('llama3.1-8b', review, {}, TYPE "
                          "OBJECT(sentiment STRING)) FROM reviews"),
    "db_query_format": ("databricks", "SELECT ai_query('ep', review, responseFormat => "
                        "'STRUCT<summary: STRING>') FROM reviews"),
    "sf_agg": ("snowflake", "SELECT product_id, AI_AGG(review, 'List complaints') FROM reviews "
               "GROUP BY product_id"),
    "sf_extract": ("snowflake", "SELECT AI_EXTRACT(review, ['product', 'price']):response "
                   "FROM reviews"),
    "sf_similarity": ("snowflake", "SELECT AI_SIMILARITY(review, 'great') FROM reviews"),
    "sf_embed": ("snowflake", "SELECT AI_EMBED('e5-base-v2', review) FROM reviews"),
    "sf_translate": ("snowflake", "SELECT AI_TRANSLATE(review, '', 'de') FROM reviews"),
    "sf_sentiment_score": ("snowflake", "SELECT SNOWFLAKE.CORTEX.SENTIMENT(review) FROM reviews"),
    "bq_if": ("bigquery", "SELECT id FROM reviews WHERE AI.IF(('Is ', review, ' positive?'))"),
    "bq_classify": ("bigquery", "SELECT AI.CLASSIFY(review, categories => ['a', 'b']) "
                    "FROM reviews"),
    "bq_score": ("bigquery", "SELECT AI.SCORE(('Rate ', review)) FROM reviews"),
    "bq_generate": ("bigquery", "SELECT AI.GENERATE(('Summarize: ', review), endpoint => "
                    "'gemini-2.5-flash').result FROM reviews"),
    "bq_comma_join": ("bigquery", "SELECT r.id FROM reviews r, products p WHERE r.product_id = "
                      "p.product_id AND AI.IF(('Does ', r.review, ' mention ', p.name))"),
    "bq_generate_text": ("bigquery", "SELECT * FROM ML.GENERATE_TEXT(MODEL `p.d.m`, (SELECT "
                         "review AS prompt FROM reviews), STRUCT(TRUE AS flatten_json_output))"),
    "db_filter": ("databricks", "SELECT id FROM reviews WHERE ai_classify(concat('Is this "
                  "positive: ', review), ARRAY('yes', 'no')) = 'yes'"),
    "db_query_filter": ("databricks", "SELECT id FROM reviews WHERE ai_query('ep', concat('Good? ',"
                        " review)) = 'yes'"),
    "db_summarize": ("databricks", "SELECT ai_summarize(review, 20) FROM reviews"),
    "db_translate": ("databricks", "SELECT ai_translate(review, 'de') FROM reviews"),
    "db_similarity": ("databricks", "SELECT ai_similarity(review, 'great') FROM reviews"),
    "db_sentiment": ("databricks", "SELECT ai_analyze_sentiment(review) FROM reviews"),
    "db_mask": ("databricks", "SELECT ai_mask(review, ARRAY('person')) FROM reviews"),
    "db_exists": ("databricks", "SELECT p.name FROM products p WHERE EXISTS (SELECT 1 FROM "
                  "reviews r WHERE r.product_id = p.product_id AND ai_classify(concat(r.review, "
                  "' praises ', p.name), ARRAY('yes', 'no')) = 'yes')"),
    "dd_filter_classify": ("duckdb", "SELECT id, ai_classify(review, ['positive', 'negative']) "
                           "FROM reviews WHERE ai_filter('Is {0} positive?', review)"),
    "dd_generate": ("duckdb", "SELECT ai_generate('Summarize {0}', review, max_tokens := 20) "
                    "FROM reviews"),
    "dd_score": ("duckdb", "SELECT ai_score('Rate {0}', review) FROM reviews"),
    "dd_aggregate": ("duckdb", "SELECT ai_aggregate(review, 'Summarize') FROM reviews"),
}

# (query, target) -> words the refusal must contain
REFUSED = {
    ("sf_agg", "databricks"): "no AI aggregate function",
    ("sf_similarity", "databricks"): "-1..1",
    ("sf_embed", "databricks"): "no embedding function",
    ("sf_sentiment_score", "databricks"): "no scoring function",
    ("bq_score", "snowflake"): "no scoring function",
    ("bq_score", "databricks"): "no scoring function",
    ("db_similarity", "snowflake"): "0..1",
    ("db_similarity", "bigquery"): "0..1",
    ("db_mask", "snowflake"): "no such task function",
    ("dd_score", "snowflake"): "no scoring function",
    ("dd_score", "databricks"): "no scoring function",
    ("dd_aggregate", "databricks"): "no AI aggregate function",
}

# faithful rewrites with a documented difference: a warning, and the prompt text changes
LOSSY = {("sf_translate", "bigquery"), ("db_translate", "bigquery"), ("db_summarize", "bigquery"),
         ("db_mask", "bigquery"), ("db_sentiment", "bigquery"), ("db_sentiment", "snowflake"),
         ("sf_sentiment_score", "bigquery")}

# a generation under a response format is BigQuery's AI.GENERATE(..., output_schema => ...),
# which reads back as the extraction of those fields (the JSON text rebuilt from its STRUCT);
# an extraction is written the same way, its fields without full_response and status
AS_OUTPUT_SCHEMA = {("sf_complete_typed", "bigquery"): "sentiment STRING",
                    ("db_query_format", "bigquery"): "summary STRING",
                    ("sf_extract", "bigquery"): "product STRING, price STRING"}


def semantic(ops):
    """What must survive any dialect: operator, prompt, bindings, label names, output type."""
    return [(op.op, op.template, tuple((b.index, b.sql, b.alias, b.column) for b in op.bindings),
             None if op.labels is None else tuple(lb.name for lb in op.labels), op.multi,
             op.output_type) for op in ops]


PAIRS = [(name, target) for name in QUERIES for target in DIALECTS]


@pytest.mark.parametrize(("name", "target"), PAIRS, ids=[f"{n}->{t}" for n, t in PAIRS])
def test_round_trip(name, target, caplog):
    dialect, sql = QUERIES[name]
    original = parse(sql, dialect, runnable=False)
    if (name, target) in REFUSED:
        with pytest.raises(UnsupportedError, match=REFUSED[(name, target)]) as info:
            transpile(sql, dialect, target, keep_source=False)
        assert target in str(info.value)
        return
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        emitted = transpile(sql, dialect, target, keep_source=False)
    again = parse(emitted, target, runnable=False)
    if (name, target) in LOSSY:
        assert caplog.records, "a lossy rewrite must log its difference"
        assert [op.op for op in again.ai_ops] == [op.op for op in original.ai_ops]
        return
    if (name, target) in AS_OUTPUT_SCHEMA:
        fields = AS_OUTPUT_SCHEMA[(name, target)]
        assert f"output_schema => '{fields}')]) AS quail_v)" in emitted, emitted
        assert [(op.op, op.labels[0].name) for op in again.ai_ops] == [
            (OpKind.AI_EXTRACT, fields.split()[0])]
        return
    assert semantic(again.ai_ops) == semantic(original.ai_ops), emitted
    back = parse(transpile(emitted, target, dialect, keep_source=False), dialect, runnable=False)
    assert semantic(back.ai_ops) == semantic(original.ai_ops)
    assert [c.to_text() for c in again.cores] == [c.to_text() for c in original.cores]


SAME = [name for name in QUERIES]


@pytest.mark.parametrize("name", SAME)
def test_emit_in_own_dialect_gives_the_same_ir(name):
    """parse -> emit through the dialect's own emitter -> parse: equal IR nodes (the wrapper
    may be spelled canonically, e.g. `:labels[0]` gains `::STRING`)."""
    dialect, sql = QUERIES[name]
    original = parse(sql, dialect, runnable=False)
    again = parse(transpile(sql, dialect, dialect, keep_source=False), dialect, runnable=False)
    strip = [dataclasses.replace(op, wrapper=None) for op in original.ai_ops]
    assert [dataclasses.replace(op, wrapper=None) for op in again.ai_ops] == strip


def test_keep_source_reprints_the_statement_unchanged():
    sql = "SELECT AI_CLASSIFY(review, ['a', 'b']) AS raw FROM reviews"
    assert transpile(sql, "snowflake", "snowflake") == sql
