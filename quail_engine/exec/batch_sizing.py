"""How many prompts an operator's next batch holds, from the engine speed its batches showed.

The rule and its parameters are the plan's (plan/batching.py: Batching); the sizer keeps what
it observes: the speed measured on the runner's batches and each operator's largest finished
batch.
"""

from __future__ import annotations

from quail_engine.infer.api import GenerateReadout
from quail_engine.infer.radix import common_prefix_length
from quail_engine.plan.batching import DEFAULT, Batching

# the plan's default parameters, by their names here (tests and notes read them)
BATCH_SECONDS = DEFAULT.seconds
FIRST_BATCH_SECONDS = DEFAULT.first_seconds
GROWTH = DEFAULT.growth
FIRST_RATE = DEFAULT.first_rate
DECODE_WAVES = DEFAULT.decode_waves
RATE_MIN_TOKENS = DEFAULT.rate_min_tokens


class BatchSizer:
    """The engine's speed as one runner's batches measured it, and the batch sizes the plan's
    `batching` gives for it. `batch_size`: prompts per batch at most. `plan_rate`: the plan's
    speed for the current call (fresh tokens/s), used until a batch is timed (None: the
    batching's first_rate)."""

    def __init__(self, batch_size: int = 65536, batching: Batching = DEFAULT):
        self.batch_size, self.batching = batch_size, batching
        self.plan_rate: float | None = None
        self.tokens_per_s: float | None = None  # measured on this runner's batches
        self._rate_tokens = 0  # fresh tokens of the batch that set tokens_per_s
        self._finished: dict[int, float] = {}  # per operator: its largest finished batch
        #                                        (guessed fresh tokens, prompt_tokens)

    def batch_prompts(self, tokens: float, op: int = 0) -> int:
        """Prompts of `tokens` fresh tokens each (prompt_tokens) in the next batch of operator
        `op`, as the plan's batching sizes it (Batching.prompts) from the speed measured so far
        and the operator's largest finished batch."""
        return self.batching.prompts(tokens, self.batch_size, self.tokens_per_s, self.plan_rate,
                                     self._finished.get(op))

    def decode_rows(self, engine, readout, tokens: float) -> int:
        """The fewest prompts of a batch that generates (Batching.decode_prompts) from the
        answers the engine's KV arena holds at once (1 where nothing is generated). Batches
        sized by engine time alone hold fewer answers than the arena, and each batch's decode
        steps then run below the batch the GPU could take."""
        if not isinstance(readout, GenerateReadout):
            return 1
        fits = getattr(engine, "decode_rows", None)
        rows = fits(int(tokens), readout.max_tokens) if fits is not None else None
        return self.batching.decode_prompts(rows, self.batch_size)

    def batch_finished(self, op: int, tokens: float) -> None:
        """Operator `op` finished a batch of `tokens` guessed fresh tokens: later batches may
        grow to the batching's growth times the largest such."""
        self._finished[op] = max(tokens, self._finished.get(op, 0.0))

    def observe(self, tokens: int, seconds: float) -> None:
        """Learn the engine's speed from a finished batch (Batching.observed_rate)."""
        self.tokens_per_s, self._rate_tokens = self.batching.observed_rate(
            self.tokens_per_s, self._rate_tokens, tokens, seconds)


WAVE_SPARE = 2  # rows' pages (the largest's) a wave is counted short of the arena: whole_waves


def whole_waves(needs: list[int], capacity: int, rows: int, waves: int) -> int | None:
    """How many rows (from the first) a generating batch takes, each row's answer needing
    `needs` pages of a decode arena of `capacity` pages: whole arena-fulls ("waves"), at least
    `waves` of them and as many as the `rows` engine time asks for reach into, never the start
    of one more. A wave that starts with few answers runs its every decode step (which reads
    all the weights) for them alone, while the next batch waits for it. The waves are counted
    as admission (infer/decode._admit) fills them when a wave's answers end together: in
    order, the next wave starting where the next row does not fit (a row larger than the arena
    alone), each wave counted WAVE_SPARE rows short of the arena, at most a sixteenth of it:
    the room a wave finds is a few pages less than the arena's when cached pages the last
    wave's final step still holds count as taken, and a row that misses its wave by a page
    decodes alone (the bound keeps one long row from counting every wave as nearly empty).
    None: more rows must be counted first (`needs` ends before the batch does)."""
    room = capacity - min(WAVE_SPARE * max(needs, default=0), capacity // 16)
    used, fill, target = 1, 0, None
    for i, need in enumerate(needs):
        if fill and fill + need > room:
            if target is not None and used >= target:
                return i
            used, fill = used + 1, 0
        fill += need
        if i + 1 == rows:
            target = max(waves, used)
    return None


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
