"""The executor follows the plan's call order (plan/call_order.py) in OpRunner.cached_first."""

from exec_fakes import FakeEngine

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.report import Report
from quail_engine.plan.call_order import AS_PLANNED


def test_the_runner_follows_the_plans_call_order():
    """With the plan's AS_PLANNED the runner keeps the rows' order (and asks the prefix cache
    nothing), whatever the cache holds."""
    class Cached(FakeEngine):
        asked = 0

        def cached_tokens(self, token_lists):
            self.asked += 1
            return [16 if self.words[t[-1]] == "beta" else 0 for t in token_lists]

    runner = OpRunner(Cached(), AnswerCache.in_dir(None), Report())
    docs = ["alpha", "beta", "gamma"]
    assert runner.cached_first([0, 1, 2], docs) == [1, 0, 2]
    runner.call_order = AS_PLANNED
    assert runner.cached_first([0, 1, 2], docs) == [0, 1, 2]
    assert runner.engine.asked == 1
