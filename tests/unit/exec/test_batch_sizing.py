"""Batches grow to BATCH_SECONDS of engine time even when the first one was slow (a sample
that paid first-shape setup): the regression of 625 batches of 32 prompts on the H200."""

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.op_runner import BATCH_SECONDS, FIRST_BATCH_SECONDS, OpRunner
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
