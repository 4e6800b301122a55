"""How many prompts an operator's next engine batch holds (PhysicalPlan.batching): the plan's
rule, applied by the executor to the engine speed it observes on each finished batch.

A batch aims at a few seconds of engine time, so answers reach the cache, progress moves and
Ctrl-C is honoured that often. The speed it is sized by is measured on the runner's own batches
(the plan's guess, or `first_rate`, only sizes the first), every operator's first batch is short
whatever the guess says, and a batch grows at most `growth` times past the largest one timed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from quail_engine.plan.cost import DeviceSpec
from quail_engine.plan.device import DEVICES


@dataclass(frozen=True)
class Batching:
    """`seconds`: engine time one batch aims at. `first_seconds`: what an operator's first
    batch aims at (it is timed before the batches grow, so progress, answer-cache commits and
    cancellation points come early whatever the speed guess). `growth`: a batch holds at most
    this many times the fresh tokens of its operator's largest finished batch (a speed measured
    on small batches can overstate larger ones: fixed costs, kernels chosen by shape; growing
    step by step bounds how long any batch runs before it is measured). `first_rate`: fresh
    tokens/s the first batch is sized at where nothing better is known (a CPU: the plan's speed
    of light there is many times too fast; a slow CPU in float32 under load reaches this much
    with the embedded models). `decode_waves`: a generating batch holds at least this many
    arena-fulls of answers (continuous batching keeps the arena full while the first answers
    finish and the next start). `rate_min_tokens`: a smaller batch (a sample) understates the
    engine's speed. `plan_rate_first`: an operator's first batch is sized at the plan's speed
    (its estimated tokens over its estimated seconds, the device's speed of light) rather than
    `first_rate`: on a GPU, which runs near it (`for_device`); a CPU runs the embedded models
    far below its probed GEMM peak."""

    seconds: float = 5.0
    first_seconds: float = 1.0
    growth: float = 4.0
    first_rate: float = 400.0
    decode_waves: int = 2
    rate_min_tokens: int = 16384
    plan_rate_first: bool = True

    def plan_rate(self, est_tokens: float, est_seconds: float) -> float | None:
        """The speed an operator's first batch is sized at from the plan's estimate of it
        (`est_tokens` fresh tokens in `est_seconds`): None (`first_rate` then) unless
        `plan_rate_first` and the estimate is known."""
        if not self.plan_rate_first or not est_seconds or not est_tokens:
            return None
        return est_tokens / est_seconds

    def prompts(self, tokens: float, batch_size: int, measured: float | None,
                plan_rate: float | None, largest: float | None) -> int:
        """Prompts of `tokens` fresh tokens each in an operator's next batch, within
        [1, batch_size]: `first_seconds` of engine time until one of its batches finished
        (`largest`: the fresh tokens of its largest, None before), then `seconds`, at the
        `measured` fresh tokens/s (before any batch was timed: `plan_rate`, else `first_rate`),
        and at most `growth` times `largest`."""
        rate = measured or plan_rate or self.first_rate
        if largest is None:
            budget = self.first_seconds * rate
        else:
            seconds = self.seconds if measured is not None else self.first_seconds
            budget = min(seconds * rate, self.growth * largest)
        return int(min(batch_size, max(1.0, budget / tokens)))

    def decode_prompts(self, fits: int | None, batch_size: int) -> int:
        """The fewest prompts of a generating batch: `decode_waves` times the `fits` answers the
        engine's KV arena holds at once (1 where unbounded: None)."""
        return 1 if fits is None else min(batch_size, self.decode_waves * fits)

    def observed_rate(self, current: float | None, current_tokens: int, tokens: int,
                      seconds: float) -> tuple[float | None, int]:
        """(speed, the fresh tokens of the batch that set it) once a batch of `tokens` fresh
        tokens took `seconds`, the speed so far `current` set by a batch of `current_tokens`.
        A batch that ran `first_seconds` or longer sets it: whatever a guess or a smaller batch
        said, the next batches are sized by what the last long one took. A shorter one can only
        raise it, and only when at least as large as the batch that set it (a short batch
        misleads both ways: fixed costs and first-shape setup understate the speed; kernels
        chosen by shape or caches that still fit overstate what a larger batch will do). A
        large short one (`rate_min_tokens`) may also lower it, at most by half (noise)."""
        if tokens <= 0 or seconds <= 0:
            return current, current_tokens
        rate = tokens / seconds
        if current is None or seconds >= self.first_seconds:
            return rate, tokens
        if tokens >= current_tokens and (rate > current or tokens >= self.rate_min_tokens):
            return max(rate, 0.5 * current), tokens
        return current, current_tokens

    def text(self) -> str:
        first = " at the plan's speed" if self.plan_rate_first else ""
        return (f"batches: ~{self.first_seconds:g} s first{first}, then ~{self.seconds:g} s at "
                f"the speed measured per batch, at most {self.growth:g}x growth")


DEFAULT = Batching()
# a CPU: every operator's first batch sized at first_rate
CPU = replace(DEFAULT, plan_rate_first=False)


def for_device(gpu: bool) -> Batching:
    """The batching the planner picks for the engine's device: on a GPU (`gpu`) the first
    batch at the plan's speed, on a CPU at `first_rate`."""
    return DEFAULT if gpu else CPU


def for_spec(device: DeviceSpec) -> Batching:
    """`for_device` of the cost model's `device`: a GPU is one costed by a GPU's figures
    (plan/device.DEVICES: named as one of them, or `<gpu> as <one of them>`)."""
    name = device.name
    return for_device(name in DEVICES or any(name.endswith(f" as {d}") for d in DEVICES))
