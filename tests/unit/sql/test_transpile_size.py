"""Transpiled SQL and its warnings grow with the input, not with its square: a vendor call is
emitted once and warned about once, and a warning quotes a bounded fragment of it."""

from __future__ import annotations

import logging

import pytest

from quail_engine.errors import QUOTE_LIMIT
from quail_engine.sql.transpiler import transpile


@pytest.mark.parametrize("write", ["snowflake", "bigquery", "duckdb"])
def test_databricks_ai_extract_with_a_thousand_labels_is_written_once(write, caplog):
    labels = ", ".join(f"'label{i}'" for i in range(1000))
    sql = f"SELECT ai_extract(review, array({labels})) AS e FROM reviews"
    with caplog.at_level(logging.WARNING, logger="quail_engine.sql.transpile"):
        out = transpile(sql, "databricks", write)
    # the call once with its labels (DuckDB's STRUCT schema names each label once more;
    # BigQuery's response is the output_schema's fields alone, STRUCT(quail_v.x AS x, ...))
    assert out.count("label999") == {"duckdb": 2, "bigquery": 3}.get(write, 1)
    assert len(out) < (5 if write == "bigquery" else 3) * len(sql)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and len(warnings[0]) < QUOTE_LIMIT + 300


def test_a_field_of_the_extracted_struct_reads_the_targets_object():
    out = transpile("SELECT ai_extract(review, array('price', 'quality')).price AS p FROM r",
                    "databricks", "snowflake")
    assert ":response.price" in out and "JSON_TRANSFORM" not in out.upper()
