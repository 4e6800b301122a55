"""The QUAIL-B corpora's table choice and row samples (quail_testing/quailb/data.py, run.parse_sample):
a sample is the first rows of the same seeded table, and leaving tables out changes no other."""

import pytest

from bench.quailb.run import parse_sample
from quail_testing.quailb import data


def test_some_tables_and_a_sample_are_the_full_corpus_rows():
    full = data.tables("tiny")
    some = data.tables("tiny", names=("reports", "terms"), sample={"reports": 1})
    assert set(some) == {"reports", "terms"}
    assert some["terms"].equals(full["terms"])
    assert some["reports"].num_rows == 1
    assert some["reports"].equals(full["reports"].slice(0, 1))


def test_a_bad_sample_names_the_table_and_its_rows():
    with pytest.raises(ValueError, match="reports has 2 rows at scale tiny, not 3"):
        data.tables("tiny", sample={"reports": 3})
    with pytest.raises(ValueError, match="unknown table 'report'"):
        data.tables("tiny", names=("report",))
    assert parse_sample("reports=200, terms=500", "1.0") == {"reports": 200, "terms": 500}
    with pytest.raises(ValueError, match="'reports' is not TABLE=N"):
        parse_sample("reports", "1.0")
    with pytest.raises(ValueError, match="reports has 500 rows at scale 0.1, not 600"):
        parse_sample("reports=600", "0.1")
