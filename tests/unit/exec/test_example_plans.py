"""Golden plans of the example queries (examples/): what `quail explain --table ...` shows and
the executor follows, step by step, for each dialect's spelling, costed for a fixed model and
device (no weights, tokens guessed from characters as explain does). A change to what the
executor will do for one of them shows here as a changed line."""

from pathlib import Path

import duckdb
import pytest

from quail_engine.exec.analyze import estimate_plans
from quail_engine.plan.cost import DeviceSpec, ModelSpec
from quail_engine.sql.query import parse

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
MODEL = ModelSpec.from_config({
    "num_hidden_layers": 30, "hidden_size": 576, "num_attention_heads": 9,
    "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152}, name="smollm2")
DEVICE = DeviceSpec("toy-cpu", flops=100e9, bandwidth=20e9)


@pytest.fixture(autouse=True)
def _prefix_sharing_on(monkeypatch):
    """The plans as the product's default runs them (a filter chunk counts rows past their
    shared beginnings only with prefix sharing on)."""
    monkeypatch.setenv("QUAIL_PREFIX_SHARING", "1")


def example_plan_text(name: str) -> str:
    """Each core's logical plan and physical steps for examples/`name` over examples/data."""
    con = duckdb.connect()
    for table in ("reviews", "products"):
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM "
                    f"read_csv_auto('{EXAMPLES / 'data' / (table + '.csv')}')")
    dialect = name.split("/")[0]
    plans = estimate_plans(con, parse((EXAMPLES / name).read_text(), dialect), MODEL, DEVICE)
    return "\n".join(f"{p.logical.text()}\n{p.text()}" for p in plans)


GOLDEN = [
    ('bigquery/classify_group.sql', [
        'project[#0](scan(reviews; cols=b_0_0))',
        'scan reviews',
        'project #0 reviews encode reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
    ]),
    ('bigquery/generate.sql', [
        'project[#0](scan(__quail_in_0; cols=b_0_0))',
        'scan __quail_in_0',
        'project #0 __quail_in_0 encode __quail_in_0:prompt release __quail_in_0:prompt',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
    ]),
    ('bigquery/join.sql', [
        'ai_join#0(scan(r; cols=b_0_0), scan(p; cols=b_0_1))',
        'scan r',
        'scan p',
        'join #0 p anchor=r release r:anchors#0',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 anchors=128/1024',
        'join #0 chunk KV: private per chunk, resident documents taken',
        'replan joins after filters',
    ]),
    ('bigquery/reviews.sql', [
        'project[#0](ai_filter#1(scan(reviews; cols=b_1_0,b_0_0)))',
        'scan reviews',
        'filter #1 reviews encode reviews:review',
        'project #0 reviews reuse reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 filter_rows=256',
        ("filter chunks reviews: sized by #1's documents (16 tokens, past shared "
         "beginnings); first_filter_rows until the arena is known"),
    ]),
    ('databricks/classify_group.sql', [
        'project[#0](scan(reviews; cols=b_0_0))',
        'scan reviews',
        'project #0 reviews encode reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
    ]),
    ('databricks/generate.sql', [
        'project[#0](scan(reviews; cols=b_0_0))',
        'scan reviews',
        'project #0 reviews encode reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
    ]),
    ('databricks/join.sql', [
        'ai_join#0(scan(p; cols=b_0_1), scan(r; cols=b_0_0))',
        'scan p',
        'scan r',
        'join #0 r anchor=r release r:anchors#0',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 anchors=128/1024',
        'join #0 chunk KV: private per chunk, resident documents taken',
        'replan joins after filters',
    ]),
    ('databricks/reviews.sql', [
        'project[#0](ai_filter#1(scan(reviews; cols=b_1_0,b_0_0)))',
        'scan reviews',
        'filter #1 reviews encode reviews:review',
        'project #0 reviews reuse reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 filter_rows=256',
        ("filter chunks reviews: sized by #1's documents (16 tokens, past shared "
         "beginnings); first_filter_rows until the arena is known"),
    ]),
    ('duckdb/classify_group.sql', [
        'project[#0](scan(reviews; cols=b_0_0))',
        'scan reviews',
        'project #0 reviews encode reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
    ]),
    ('duckdb/generate.sql', [
        'project[#0](ai_filter#1(scan(reviews; cols=b_1_0,b_0_0)))',
        'scan reviews',
        'filter #1 reviews encode reviews:review',
        'project #0 reviews reuse reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 filter_rows=256',
        ("filter chunks reviews: sized by #1's documents (16 tokens, past shared "
         "beginnings); first_filter_rows until the arena is known"),
        "limit 5 ordered: every filter runs; projections left to the statement's 5 rows",
    ]),
    ('duckdb/join.sql', [
        'ai_join#0(scan(r; cols=b_0_0), scan(p; cols=b_0_1))',
        'scan r',
        'scan p',
        'join #0 p anchor=r release r:anchors#0',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 anchors=128/1024',
        'join #0 chunk KV: private per chunk, resident documents taken',
        'replan joins after filters',
    ]),
    ('duckdb/reviews.sql', [
        'project[#0](ai_filter#1(scan(reviews; cols=b_1_0,b_0_0)))',
        'scan reviews',
        'filter #1 reviews encode reviews:review',
        'project #0 reviews reuse reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 filter_rows=256',
        ("filter chunks reviews: sized by #1's documents (16 tokens, past shared "
         "beginnings); first_filter_rows until the arena is known"),
    ]),
    ('snowflake/classify_group.sql', [
        'project[#0](scan(reviews; cols=b_0_0))',
        'scan reviews',
        'project #0 reviews encode reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
    ]),
    ('snowflake/generate.sql', [
        'project[#0](ai_filter#1(scan(reviews; cols=b_1_0,b_0_0)))',
        'scan reviews',
        'filter #1 reviews encode reviews:review',
        'project #0 reviews reuse reviews:review release reviews:review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 filter_rows=256',
        ("filter chunks reviews: sized by #1's documents (16 tokens, past shared "
         "beginnings); first_filter_rows until the arena is known"),
        "limit 5 ordered: every filter runs; projections left to the statement's 5 rows",
    ]),
    ('snowflake/join.sql', [
        'ai_join#0(scan(r; cols=b_0_0), scan(p; cols=b_0_1))',
        'scan r',
        'scan p',
        'join #0 p anchor=r release r:anchors#0',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 anchors=128/1024',
        'join #0 chunk KV: private per chunk, resident documents taken',
        'replan joins after filters',
    ]),
    ('snowflake/reviews.sql', [
        'project[#0](ai_filter#1(scan(r; cols=b_1_0,b_0_0)))',
        'scan r',
        'filter #1 r encode r:r.review',
        'project #0 r reuse r:r.review release r:r.review',
        'calls: cached answers skipped, prefix-cached documents first (observed per call)',
        'batches: ~1 s first, then ~5 s at the speed measured per batch, at most 4x growth',
        'chunks arena_share=0.25 filter_rows=256',
        ("filter chunks r: sized by #1's documents (16 tokens, past shared "
         "beginnings); first_filter_rows until the arena is known"),
    ]),
]


def test_every_example_has_a_golden_plan():
    assert sorted(n for n, _ in GOLDEN) == sorted(
        str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("*/*.sql"))


@pytest.mark.parametrize("name,expected", GOLDEN, ids=[n for n, _ in GOLDEN])
def test_example_plan_golden(name, expected):
    assert example_plan_text(name).splitlines() == expected
