"""How many prompts an operator's next batch holds, from the engine speed its batches showed.

A batch aims at a few seconds of engine time, so answers reach the cache, progress moves and
Ctrl-C is honoured that often; the speed it is sized by is measured on the runner's own
batches (the plan's guess, or FIRST_RATE, only sizes the first), and a batch grows at most
GROWTH times past the largest one timed.
"""

from __future__ import annotations

from quail_engine.infer.api import GenerateReadout
from quail_engine.infer.radix import common_prefix_length

BATCH_SECONDS = 5.0     # engine time one batch aims at (answers reach the cache this often)
# engine time an operator's first batch aims at: it is timed before the batches grow, so
# progress, answer-cache commits and cancellation points come early whatever the speed guess
FIRST_BATCH_SECONDS = 1.0
# a batch holds at most this many times the fresh tokens of its operator's batch before: a
# speed measured on small batches can overstate larger ones (fixed costs, kernels chosen by
# shape), and growing step by step bounds how long any batch can run before it is measured
GROWTH = 4.0
# fresh tokens per second the first batch is sized at where nothing better is known (a CPU:
# the plan's speed of light there is many times too fast): a slow CPU in float32 under load
# reaches this much with the embedded models, so the first batch ends within about a second
FIRST_RATE = 400.0
# a generating batch holds at least this many arena-fulls of answers: continuous batching keeps
# the arena full while the first answers finish and the next start, and only the last wave of
# a batch drains below it
DECODE_WAVES = 2
RATE_MIN_TOKENS = 16384  # a smaller batch (a sample) understates the engine's speed


class BatchSizer:
    """The engine's speed as one runner's batches measured it, and the batch sizes it gives.
    `batch_size`: prompts per batch at most. `plan_rate`: the plan's speed for the current
    call (fresh tokens/s), used until a batch is timed (None: FIRST_RATE)."""

    def __init__(self, batch_size: int = 65536):
        self.batch_size = batch_size
        self.plan_rate: float | None = None
        self.tokens_per_s: float | None = None  # measured on this runner's batches
        self._rate_tokens = 0  # fresh tokens of the batch that set tokens_per_s
        self._finished: dict[int, float] = {}  # per operator: its largest finished batch
        #                                        (guessed fresh tokens, prompt_tokens)

    def batch_prompts(self, tokens: float, op: int = 0) -> int:
        """Prompts of `tokens` fresh tokens each (prompt_tokens) in the next batch of operator
        `op`, within [1, batch_size]: until one of its batches has finished, about
        FIRST_BATCH_SECONDS of engine time, then BATCH_SECONDS, at the fresh tokens/s
        measured so far (before any batch was timed: plan_rate, else FIRST_RATE), and at most
        GROWTH times the operator's largest finished batch. So no batch runs long before the
        speed it is sized by was measured on one of comparable size, and answers reach the
        cache, progress moves and Ctrl-C is honoured every few seconds whatever the guess
        said."""
        rate = self.tokens_per_s or self.plan_rate or FIRST_RATE
        done = self._finished.get(op)
        if done is None:
            budget = FIRST_BATCH_SECONDS * rate
        else:
            seconds = BATCH_SECONDS if self.tokens_per_s is not None else FIRST_BATCH_SECONDS
            budget = min(seconds * rate, GROWTH * done)
        return int(min(self.batch_size, max(1.0, budget / tokens)))

    def decode_rows(self, engine, readout, tokens: float) -> int:
        """The fewest prompts of a batch that generates: DECODE_WAVES times the answers the
        engine's KV arena holds at once (1 where its KV is unbounded, or nothing is
        generated). Batches sized by engine time alone hold fewer answers than the arena, and
        each batch's decode steps then run below the batch the GPU could take."""
        if not isinstance(readout, GenerateReadout):
            return 1
        fits = getattr(engine, "decode_rows", None)
        rows = fits(int(tokens), readout.max_tokens) if fits is not None else None
        return 1 if rows is None else min(self.batch_size, DECODE_WAVES * rows)

    def batch_finished(self, op: int, tokens: float) -> None:
        """Operator `op` finished a batch of `tokens` guessed fresh tokens: later batches may
        grow to GROWTH times the largest such."""
        self._finished[op] = max(tokens, self._finished.get(op, 0.0))

    def observe(self, tokens: int, seconds: float) -> None:
        """Learn the engine's speed from a finished batch. A batch that ran FIRST_BATCH_SECONDS
        or longer sets it: whatever a guess or a smaller batch said, the next batches are sized
        by what the last long one took. A shorter one can only raise it, and only when it is at
        least as large as the batch that set it: a short batch misleads both ways (fixed costs
        and first-shape setup understate the speed; kernels chosen by shape or caches that
        still fit overstate what a larger batch will do). A large short one (RATE_MIN_TOKENS)
        may also lower it, at most by half (noise)."""
        if tokens <= 0 or seconds <= 0:
            return
        rate, current = tokens / seconds, self.tokens_per_s
        if current is None or seconds >= FIRST_BATCH_SECONDS:
            self.tokens_per_s, self._rate_tokens = rate, tokens
        elif tokens >= self._rate_tokens:
            if rate > current or tokens >= RATE_MIN_TOKENS:
                self.tokens_per_s = max(rate, 0.5 * current)
                self._rate_tokens = tokens


def prompt_tokens(sample: list[tuple[str, str]], resident_prefix: bool, engine) -> float:
    """Fresh tokens a prompt like those of `sample` costs, guessed as characters / 4: its
    question alone when its document is resident (a join partner, a second predicate), else
    the whole prompt less, where `engine` shares prefixes across rows (its prefix cache), the
    beginning it shares with the row before (rows come sorted by prompt: agent traces'
    cumulative snapshots each add a few turns, and counted whole they would make batches of a
    small fraction of the target)."""
    if not sample:
        return 1.0
    if resident_prefix:
        chars = sum(len(s) for _, s in sample)
    else:
        whole = [p + s for p, s in sample]
        chars = sum(map(len, whole))
        if getattr(engine, "prefix_cache", None) is not None:
            chars -= sum(common_prefix_length(a, b) for a, b in zip(whole, whole[1:]))
    return max(1.0, chars / (4.0 * len(sample)))
