"""Metamorphic suite: an answer depends on the SQL and the row values only. The same question
asked under another plan - the other anchor hint, the tables written the other way round, an
equality conjunct that keeps every pair, batches of 1/7/64 prompts, KV sharing off, a LIMIT, a
warm answer cache, no selectivity sampling - returns the same rows as every call asked alone and
unplanned, in float32 on the CPU with the real embedded model. (Prefix sharing off needs an
engine built without its prefix cache: test_plan_invariance_suite.py, with the examples, QUAIL-B
queries and Ray workers.)

Budget: ~1-2 minutes on a 2-core CPU (13 runs of 4 small queries over 5 reviews x 3 products).
"""

from __future__ import annotations

import pytest

from quail_engine.exec.config import SessionConfig
from quail_engine.exec.session import QuailSession

pytestmark = pytest.mark.model

JOIN = ("SELECT r.id, p.product_id FROM reviews r JOIN products p ON AI_FILTER(PROMPT("
        "'Is the review {0} about the product {1}?', r.review, p.name)<hint>)<extra> "
        "ORDER BY 1, 2")
JOIN_SWAPPED = ("SELECT r.id, p.product_id FROM products p JOIN reviews r ON AI_FILTER(PROMPT("
                "'Is the review {0} about the product {1}?', r.review, p.name)<hint>)<extra> "
                "ORDER BY 1, 2")
FILTERS = ("SELECT id, AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::string AS s "
           "FROM reviews WHERE AI_FILTER(PROMPT('Is this review positive? {0}', review)) "
           "AND AI_FILTER(PROMPT('Does this review mention a price? {0}', review)) ORDER BY id")
FILTERS_SWAPPED = ("SELECT id, AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::string "
                   "AS s FROM reviews WHERE AI_FILTER(PROMPT('Does this review mention a "
                   "price? {0}', review)) AND AI_FILTER(PROMPT('Is this review positive? {0}', "
                   "review)) ORDER BY id")
KEEPS_EVERY_PAIR = " AND r.id + p.product_id > 0"


def _run(con, engine, sql, tmp_path, **options):
    cache = options.pop("cache_dir", None)
    config = SessionConfig(device="cpu", cache_dir=cache, use_cache=cache is not None,
                           **options)
    session = QuailSession(con.cursor(), lambda: engine, config)
    return [tuple(r.values()) for r in session.execute(sql, "snowflake").to_pylist()]


def _join(hint: str = "", extra: str = "", swapped: bool = False) -> str:
    return (JOIN_SWAPPED if swapped else JOIN).replace("<hint>", hint).replace("<extra>", extra)


@pytest.fixture(scope="module")
def alone(con, engine, tmp_path_factory):
    """Every call asked alone: DuckDB evaluates each AI call row by row, nothing planned,
    shared or batched."""
    tmp = tmp_path_factory.mktemp("alone")
    return {name: _run(con, engine, sql, tmp, plan=False, share_kv=False, batch_size=1)
            for name, sql in (("join", _join()), ("filters", FILTERS))}


VARIANTS = {
    "planned": {},
    "batch 1": {"batch_size": 1},
    "batch 7": {"batch_size": 7},
    "batch 64": {"batch_size": 64},
    "no kv sharing": {"share_kv": False},
    "no selectivity sampling": {"sample_size": 0},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_plans_and_batches_do_not_change_a_join(con, engine, alone, tmp_path, variant):
    assert _run(con, engine, _join(), tmp_path, **VARIANTS[variant]) == alone["join"]


@pytest.mark.parametrize("hint", ["r", "p"])
def test_anchor_hints_do_not_change_a_join(con, engine, alone, tmp_path, hint):
    sql = _join(hint=f", {{'anchor': '{hint}'}}")
    assert _run(con, engine, sql, tmp_path) == alone["join"]


def test_the_tables_written_the_other_way_round(con, engine, alone, tmp_path):
    assert _run(con, engine, _join(swapped=True), tmp_path) == alone["join"]


def test_an_equality_conjunct_that_keeps_every_pair(con, engine, alone, tmp_path):
    assert _run(con, engine, _join(extra=KEEPS_EVERY_PAIR), tmp_path) == alone["join"]
    equal = _join(extra=" AND r.product_id = p.product_id")
    assert _run(con, engine, equal, tmp_path) == [
        row for row in alone["join"]
        if dict(con.execute("SELECT id, product_id FROM reviews").fetchall())[row[0]] == row[1]]


def test_a_limit_returns_the_first_rows(con, engine, alone, tmp_path):
    assert _run(con, engine, _join() + " LIMIT 2", tmp_path) == alone["join"][:2]
    assert _run(con, engine, FILTERS + " LIMIT 1", tmp_path) == alone["filters"][:1]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_plans_and_batches_do_not_change_filters(con, engine, alone, tmp_path, variant):
    assert _run(con, engine, FILTERS, tmp_path, **VARIANTS[variant]) == alone["filters"]
    assert _run(con, engine, FILTERS_SWAPPED, tmp_path, **VARIANTS[variant]) == alone["filters"]


def test_a_warm_answer_cache(con, engine, alone, tmp_path):
    cache = tmp_path / "answers"
    for _ in range(2):  # cold, then every answer from the cache
        assert _run(con, engine, _join(), tmp_path, cache_dir=cache) == alone["join"]
        assert _run(con, engine, FILTERS, tmp_path, cache_dir=cache) == alone["filters"]
