"""How many prompts an engine batch holds (plan/batching.py): the plan's rule, applied by the
executor (exec/batch_sizing.BatchSizer) to the speed it measures per batch."""

from dataclasses import replace

import pytest
from plan_fakes import DEVICE as FAKE_DEVICE
from plan_fakes import context, info

from quail_engine.plan.batching import CPU, DEFAULT, Batching, for_device, for_spec
from quail_engine.plan.cost import DeviceSpec
from quail_engine.plan.device import H100_SXM
from quail_engine.plan.nodes import Scan
from quail_engine.plan.physical import PhysicalPlan
from quail_engine.plan.strategy import with_strategy

B = Batching()

PROMPTS_CASES = [
    # (tokens a prompt, batch size, measured tokens/s, plan tokens/s, largest finished) -> prompts
    (100.0, 65536, None, None, None, 4),            # first batch: 1 s at first_rate
    (100.0, 65536, None, 30_000.0, None, 300),      # first batch: 1 s at the plan's speed
    (100.0, 65536, 2_000.0, None, 1_000.0, 40),     # then GROWTH x the largest finished
    (100.0, 65536, 2_000.0, None, 100_000.0, 100),  # ... or 5 s at the measured speed
    (100.0, 65536, None, 30_000.0, 1_000.0, 40),    # nothing timed yet: 1 s, and the growth
    (100.0, 8, 2_000.0, None, 100_000.0, 8),        # never past the batch size
    (1e9, 65536, None, None, None, 1),              # at least one prompt
]


@pytest.mark.parametrize("tokens,size,measured,plan,largest,expected", PROMPTS_CASES)
def test_prompts(tokens, size, measured, plan, largest, expected):
    assert B.prompts(tokens, size, measured, plan, largest) == expected


RATE_CASES = [
    # (speed so far, its batch's tokens, batch tokens, seconds) -> (speed, its batch's tokens)
    (None, 0, 1_000, 0.5, (2_000.0, 1_000)),        # the first timed batch sets it
    (2_000.0, 1_000, 3_000, 2.0, (1_500.0, 3_000)),  # a long batch sets it, slower too
    (2_000.0, 1_000, 2_000, 0.5, (4_000.0, 2_000)),  # a short larger one may raise it
    (2_000.0, 1_000, 1_500, 0.9, (2_000.0, 1_000)),  # ... not lower it
    (2_000.0, 1_000, 500, 0.1, (2_000.0, 1_000)),    # a smaller one: nothing
    (4_000.0, 1_000, 20_000, 0.9, (22_222.2, 20_000)),  # a large short one (rate_min_tokens)
    (4_000.0, 16_000, 20_000, 0.99, (20_202.0, 20_000)),
    (40_000.0, 16_000, 16_384, 0.99, (20_000.0, 16_384)),  # lowered at most by half
    (2_000.0, 1_000, 0, 1.0, (2_000.0, 1_000)),      # nothing measured
]


@pytest.mark.parametrize("current,current_tokens,tokens,seconds,expected", RATE_CASES)
def test_observed_rate(current, current_tokens, tokens, seconds, expected):
    rate, rate_tokens = B.observed_rate(current, current_tokens, tokens, seconds)
    assert (round(rate, 1), rate_tokens) == (pytest.approx(expected[0], abs=0.1), expected[1])


def test_decode_prompts_and_explain_line():
    assert B.decode_prompts(None, 64) == 1
    assert B.decode_prompts(40, 64) == 64
    assert B.decode_prompts(10, 64) == 20
    assert CPU.text() == ("batches: ~1 s first, then ~5 s at the speed measured per batch, "
                          "at most 4x growth")
    assert DEFAULT.text() == ("batches: ~1 s first at the plan's speed, then ~5 s at the speed "
                              "measured per batch, at most 4x growth")


def test_the_planner_sizes_the_first_batch_at_the_plans_speed_only_on_a_gpu():
    """Which speed an operator's first batch is sized at is the plan's batching, picked from
    the device (a CPU runs the embedded models far below its probed peak: first_rate there)."""
    assert for_device(True).plan_rate_first and not for_device(False).plan_rate_first
    assert for_spec(H100_SXM) == DEFAULT
    assert for_spec(DeviceSpec("NVIDIA L40S as h200-sustained", 1e12, 1e12)) == DEFAULT
    assert for_spec(DeviceSpec("cpu-float32", 1e11, 2e10)) == CPU
    assert DEFAULT.plan_rate(30_000.0, 2.0) == 15_000.0
    assert CPU.plan_rate(30_000.0, 2.0) is None
    assert DEFAULT.plan_rate(30_000.0, 0.0) is None  # no estimate: first_rate


@pytest.mark.parametrize("device,expected", [(H100_SXM, DEFAULT), (FAKE_DEVICE, CPU)])
def test_a_core_plan_carries_its_devices_batching(device, expected):
    ctx = replace(context([info(0, "ai_filter", ["r"], {"r": 300})], {"r": 100}), device=device)
    plan = with_strategy(PhysicalPlan(Scan("r"), (), context=ctx))
    assert plan.batching == expected


def test_the_sizer_follows_the_plans_batching():
    """A plan with other parameters sizes the runner's batches by them (the core runner hands
    the plan's batching to its runner's sizer)."""
    from quail_engine.exec.batch_sizing import BatchSizer

    sizer = BatchSizer()
    assert sizer.batch_prompts(100.0) == 4
    sizer.batching = Batching(first_seconds=2.0, first_rate=1_000.0)
    assert sizer.batch_prompts(100.0) == 20
