"""`quail explain` shows an AI aggregate: its step (the rows it reads, their tokens) and how a
group past the context is answered (map chunks of the cost model's size), where the plan
showed the scan alone."""

import duckdb
from test_example_plans import DEVICE, EXAMPLES, MODEL

from quail_engine.exec.analyze import estimate_plans
from quail_engine.exec.prompts import DEFAULT_MAX_TOKENS
from quail_engine.plan.chunking import map_chunk_tokens
from quail_engine.sql.query import parse


def _plans(sql: str, dialect: str = "snowflake"):
    con = duckdb.connect()
    con.execute(f"CREATE VIEW reviews AS SELECT * FROM "
                f"read_csv_auto('{EXAMPLES / 'data' / 'reviews.csv'}')")
    return estimate_plans(con, parse(sql, dialect), MODEL, DEVICE)


def test_an_ai_aggregate_is_a_step_of_the_plan_with_its_map_chunk():
    (plan,) = _plans("SELECT product_id, AI_AGG(review, 'Summarize the complaints') AS s "
                     "FROM reviews GROUP BY product_id")
    (step,) = [s for s in plan.steps if s.kind == "aggregate"]
    assert (step.op, step.alias, step.rows_in) == (0, "reviews", 40.0)
    assert step.work.fresh_tokens > 40 and step.est_seconds > 0
    question = int(plan.context.ops[0].question_tokens)
    answer = plan.context.ops[0].answer_tokens  # the call's own length: no session cap here
    assert answer == DEFAULT_MAX_TOKENS
    assert step.map_chunk == map_chunk_tokens(MODEL, answer, question, 1 << 30) > 0
    assert (f"aggregate #0: one prompt per group; a group past the context in map chunks of "
            f"about {step.map_chunk:,} tokens, their answers reduced") in plan.strategy_lines()


def test_each_vendors_aggregate_spelling_is_planned():
    for sql, dialect in (
            ("SELECT AI.AGG(review, 'Summarize') AS s FROM reviews", "bigquery"),
            ("SELECT AI_SUMMARIZE_AGG(review) AS s FROM reviews", "snowflake")):
        (plan,) = _plans(sql, dialect)
        assert [s.kind for s in plan.steps] == ["scan", "aggregate"], sql


def test_the_map_chunk_is_sized_for_the_writer_at_its_measured_answer_length():
    """The plan sizes the chunk for the model that writes the answer, at the answer's length
    within the session's cap (what a run and `quail explain` both measure)."""
    from dataclasses import replace

    from quail_engine.plan.cost import ModelSpec
    from quail_engine.plan.physical import aggregate_step

    (plan,) = _plans("SELECT product_id, AI_AGG(review, 'Summarize') AS s FROM reviews "
                     "GROUP BY product_id")
    ctx = plan.context
    question = int(ctx.ops[0].question_tokens)
    writer = ModelSpec("writer", 30, 576, 9, 3, 64, 1536, 49152)
    measured = replace(ctx, writer=writer,
                       ops={0: replace(ctx.ops[0], answer_tokens=16)})
    step = aggregate_step(0, "reviews", 40.0, measured)
    assert step.map_chunk == map_chunk_tokens(writer, 16, question, 1 << 30)
    assert step.map_chunk != map_chunk_tokens(MODEL, 64, question, 1 << 30)


def test_explain_sizes_the_chunk_at_the_sessions_answer_cap():
    con = duckdb.connect()
    con.execute(f"CREATE VIEW reviews AS SELECT * FROM "
                f"read_csv_auto('{EXAMPLES / 'data' / 'reviews.csv'}')")
    sql = "SELECT AI_AGG(review, 'Summarize') AS s FROM reviews"
    (plan,) = estimate_plans(con, parse(sql, "snowflake"), MODEL, DEVICE, max_new_tokens=16)
    assert plan.context.ops[0].answer_tokens == 16
