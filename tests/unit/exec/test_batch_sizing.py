"""Batches grow to BATCH_SECONDS of engine time even when the first one was slow (a sample
that paid first-shape setup): the regression of 625 batches of 32 prompts on the H200."""

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.op_runner import BATCH_SECONDS, FIRST_BATCH, FIRST_BATCH_SECONDS, OpRunner
from quail_engine.exec.report import Report


def test_batches_grow_after_a_slow_small_first_batch():
    runner = OpRunner(None, AnswerCache.in_dir(None), Report())
    doc = ("word " * 264, "Is it good?")  # ~330 tokens at 4 characters a token
    engine_tokens_per_s = 140_000.0
    runner._observe(8 * 330, 1.78)  # the sample: 8 prompts, slowed by setup
    sizes = []
    for _ in range(6):
        n = runner._batch_prompts([doc] * 64, resident_prefix=False)
        sizes.append(n)
        runner._observe(n * 330, n * 330 / engine_tokens_per_s)
    assert sizes[-1] * 330 / engine_tokens_per_s >= 0.8 * BATCH_SECONDS, sizes



def test_the_first_batch_at_the_plans_estimate_is_short():
    """Before a batch is timed the speed is the plan's estimate (several times too fast on a
    CPU), so the first batches aim at FIRST_BATCH_SECONDS of it: answers reach the cache, and
    the speed is measured, early; then batches aim at BATCH_SECONDS of the measured speed."""
    runner = OpRunner(None, AnswerCache.in_dir(None), Report())
    doc = ("word " * 264, "Is it good?")
    tokens = (len(doc[0]) + len(doc[1])) / 4  # the runner's guess: 4 characters a token
    runner._tokens_per_s = 33_000.0  # the plan's estimate
    first = runner._batch_prompts([doc] * 64, resident_prefix=False)
    assert first == int(FIRST_BATCH_SECONDS * 33_000 / tokens) < int(BATCH_SECONDS * 33_000 /
                                                                      tokens)
    runner._observe(int(first * tokens), 7.0)  # it took 7 s: the estimate was ~7x too fast
    assert runner._batch_prompts([doc] * 64, resident_prefix=False) == \
        int(BATCH_SECONDS * runner._tokens_per_s / tokens)


def test_rows_that_extend_the_row_before_count_what_they_add_where_the_engine_shares_prefixes():
    """Cumulative agent-trace snapshots (each the one before plus a turn): with prefix sharing
    a row computes only its new turn and question, so a batch holds BATCH_SECONDS of those; an
    engine that shares nothing computes every row whole."""
    from types import SimpleNamespace

    turn = "turn " * 80  # ~100 tokens
    snapshots = [("system " * 400 + turn * (k + 1), " Did the agent finish?") for k in range(64)]
    added = (len(turn) + len(snapshots[0][1])) / 4  # tokens a row adds over the one before
    rate = 50_000.0
    sizes = {}
    for name, engine in (("shared", SimpleNamespace(prefix_cache=object())),
                         ("whole", SimpleNamespace(prefix_cache=None))):
        runner = OpRunner(engine, AnswerCache.in_dir(None), Report())
        runner._observe(int(rate * BATCH_SECONDS), BATCH_SECONDS)
        sizes[name] = runner._batch_prompts(snapshots, resident_prefix=False)
    # every row but the first adds one turn: the batch is within 10% of BATCH_SECONDS of them
    assert abs(sizes["shared"] * added / rate - BATCH_SECONDS) < 0.1 * BATCH_SECONDS, sizes
    whole = sum(len(p) + len(s) for p, s in snapshots) / 4 / len(snapshots)
    assert sizes["whole"] == max(FIRST_BATCH, int(BATCH_SECONDS * rate / whole)), sizes
