"""Batch sizes: every operator's first batch is short whatever the speed guess says, batches
grow to BATCH_SECONDS of measured engine time, and no batch runs long before a batch of
comparable size was timed (answers reach the cache, progress moves and Ctrl-C is honoured every
few seconds)."""

from types import SimpleNamespace

from exec_fakes import FakeEngine

from quail_engine.exec.answer_cache import AnswerCache
from quail_engine.exec.batch_sizing import (
    BATCH_SECONDS,
    FIRST_BATCH_SECONDS,
    FIRST_RATE,
    GROWTH,
    prompt_tokens,
)
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.report import Report
from quail_engine.plan.batching import CPU

DOC = ("word " * 264, "Is it good?")  # ~330 tokens at 4 characters a token


def _runner(engine=None) -> OpRunner:
    return OpRunner(engine, AnswerCache.in_dir(None), Report())


def _run(runner: OpRunner, seconds_of, prompts: int, per_prompt: float) -> list[float]:
    """The engine seconds of each batch of one operator over `prompts` prompts, in the
    executor's order: batch N+1 is sized while batch N runs, so before N's time is known."""
    times, pending, left = [], None, prompts
    while left or pending is not None:
        submitted = None
        if left:
            n = min(left, runner.sizer.batch_prompts(per_prompt, op=0))
            left -= n
            submitted = n * per_prompt
        if pending is not None:
            seconds = seconds_of(pending)
            runner.sizer.observe(int(pending), seconds)
            runner.sizer.batch_finished(0, pending)
            times.append(seconds)
        pending = submitted
    return times


def test_batches_grow_after_a_slow_small_first_batch():
    """A sample slowed by first-shape setup: the batches still reach BATCH_SECONDS (the
    regression of 625 batches of 32 prompts on the H200)."""
    runner = _runner()
    tokens = prompt_tokens([DOC] * 64, resident_prefix=False, engine=runner.engine)
    engine_tokens_per_s = 140_000.0
    runner.sizer.observe(int(8 * tokens), 1.78)  # the sample: 8 prompts, slowed by setup
    runner.sizer.batch_finished(0, 8 * tokens)
    times = _run(runner, lambda t: t / engine_tokens_per_s, 20_000, tokens)
    assert max(times[-4:-1]) >= 0.8 * BATCH_SECONDS, times
    assert len(times) < 30, times


def test_the_first_batch_at_the_plans_estimate_is_short():
    """Before a batch is timed the speed is the plan's estimate (where the runner trusts it),
    so the first batches aim at FIRST_BATCH_SECONDS of it; a batch that ran long sets the speed
    the next ones are sized by."""
    runner = _runner()
    tokens = prompt_tokens([DOC] * 64, resident_prefix=False, engine=runner.engine)
    runner.sizer.plan_rate = 33_000.0
    first = runner.sizer.batch_prompts(tokens)
    assert first == int(FIRST_BATCH_SECONDS * 33_000 / tokens)
    runner.sizer.observe(int(first * tokens), 7.0)  # it took 7 s: the estimate was ~7x too fast
    runner.sizer.batch_finished(0, first * tokens)
    assert runner.sizer.batch_prompts(tokens) == int(
        BATCH_SECONDS * runner.sizer.tokens_per_s / tokens)


def test_without_a_trusted_estimate_the_first_batch_is_sized_at_first_rate():
    """On a CPU the plan's speed of light is many times too fast: the first batch holds about
    FIRST_BATCH_SECONDS at FIRST_RATE, not a fixed number of prompts (32 prompts of long
    documents would run for minutes on a slow CPU)."""
    runner = _runner()
    runner.sizer.batching = CPU
    long_doc = ("word " * 4000, "Is it good?")
    tokens = prompt_tokens([long_doc] * 8, resident_prefix=False, engine=runner.engine)
    assert runner.sizer.batch_prompts(tokens) == 1
    short = prompt_tokens([("Great kettle.", "Positive?")] * 8, resident_prefix=False,
                          engine=runner.engine)
    assert runner.sizer.batch_prompts(short) == int(FIRST_BATCH_SECONDS * FIRST_RATE / short)


def test_no_batch_runs_long_when_small_batches_overstate_the_speed():
    """The engine is fast on small batches and 17x slower per token on large ones (kernels
    chosen by shape, a cache that spills): the speed the small batches showed never sizes a
    batch far past the largest one timed, so no batch runs much past BATCH_SECONDS."""
    runner = _runner()
    runner.sizer.batching = CPU

    def seconds_of(tokens: float) -> float:
        return tokens / (5_000.0 if tokens < 3_000 else 300.0)

    times = _run(runner, seconds_of, 5_000, 70.0)
    assert times[0] <= 2 * FIRST_BATCH_SECONDS, times
    # a batch is at most GROWTH times one that ran fast (under 3,000 tokens) ...
    assert max(times) <= GROWTH * 3_000 / 300.0, times
    # ... and once the slow size was timed, only the batch already in flight runs long again
    assert sum(t > 2 * BATCH_SECONDS for t in times) <= 2, times


def test_rows_that_extend_the_row_before_count_what_they_add_where_the_engine_shares_prefixes():
    """Cumulative agent-trace snapshots (each the one before plus a turn): with prefix sharing
    a row computes only its new turn and question, so a batch holds BATCH_SECONDS of those; an
    engine that shares nothing computes every row whole."""
    turn = "turn " * 80  # ~100 tokens
    snapshots = [("system " * 400 + turn * (k + 1), " Did the agent finish?") for k in range(64)]
    added = (len(turn) + len(snapshots[0][1])) / 4  # tokens a row adds over the one before
    rate = 50_000.0
    sizes = {}
    for name, engine in (("shared", SimpleNamespace(prefix_cache=object())),
                         ("whole", SimpleNamespace(prefix_cache=None))):
        runner = _runner(engine)
        runner.sizer.observe(int(rate * BATCH_SECONDS), BATCH_SECONDS)
        runner.sizer.batch_finished(0, 1e12)  # batches this large have run
        sizes[name] = runner.sizer.batch_prompts(prompt_tokens(snapshots, False, runner.engine))
    # every row but the first adds one turn: the batch is within 10% of BATCH_SECONDS of them
    assert abs(sizes["shared"] * added / rate - BATCH_SECONDS) < 0.1 * BATCH_SECONDS, sizes
    whole = sum(len(p) + len(s) for p, s in snapshots) / 4 / len(snapshots)
    assert sizes["whole"] == int(BATCH_SECONDS * rate / whole), sizes


def test_a_generating_batch_holds_two_arena_fulls_of_answers():
    """A batch that generates holds at least DECODE_WAVES times the answers the engine's KV
    arena holds at once (its decode steps run at the batch the GPU can take, not the engine
    time's few hundred rows); other readouts, and engines whose KV is unbounded, keep the
    time-sized batches."""
    from quail_engine.exec.batch_sizing import DECODE_WAVES
    from quail_engine.infer.api import BooleanReadout, GenerateReadout
    from quail_engine.infer.decode import fitting

    asked = []

    def decode_rows(prompt_len, max_tokens):
        asked.append((prompt_len, max_tokens))
        return fitting(367_680, 64, prompt_len + max_tokens, SimpleNamespace(decode_step=1))

    runner = _runner(SimpleNamespace(decode_rows=decode_rows))
    tokens = prompt_tokens([DOC] * 64, resident_prefix=False, engine=runner.engine)
    generate = GenerateReadout(max_tokens=256)
    assert runner.sizer.batch_prompts(tokens, op=0) < 400  # the engine-time size alone
    rows = runner.sizer.decode_rows(runner.engine, generate, tokens)
    # 330 + 256 tokens: 9 whole pages + 2 of slack each, 5,745 pages
    assert rows == DECODE_WAVES * (367_680 // 64 // 11) and asked == [(int(tokens), 256)]
    boolean = BooleanReadout(("yes",), ("no",))
    assert runner.sizer.decode_rows(runner.engine, boolean, tokens) == 1
    unbounded = _runner(SimpleNamespace(decode_rows=lambda *a: None))
    assert unbounded.sizer.decode_rows(unbounded.engine, generate, tokens) == 1


def test_whole_waves_fills_arena_fulls_without_starting_another():
    """A generating batch takes whole decode waves: at least `waves` arena-fulls, as many as
    engine time asks for, never the first rows of one more (they would decode alone)."""
    from quail_engine.exec.batch_sizing import whole_waves

    needs = [5] * 100  # an arena of 170 pages less two rows' spare: 32 rows a wave
    assert whole_waves(needs, 170, 1, 2) == 64
    assert whole_waves(needs, 170, 64, 2) == 64
    assert whole_waves(needs, 170, 65, 2) == 96  # 65 rows reach into a third wave: all of it
    assert whole_waves(needs[:40], 170, 1, 2) is None  # more rows must be counted first
    assert whole_waves(needs[:50], 170, 70, 2) is None
    # the H100's arena at the default share (3,368 pages) and rows of 8 pages: 419 a wave,
    # two rows' pages spare
    assert whole_waves([8] * 1000, 3368, 1, 2) == 838
    assert whole_waves([60, 5, 5], 52, 1, 1) == 1  # a row larger than the arena decodes alone
    # one long row among short ones: the short ones still fill their waves (37 to the arena's
    # 120 pages less its sixteenth), the long one starts a wave of its own
    assert whole_waves([3] * 50 + [100] + [3] * 50, 120, 1, 2) == 50


class WaveEngine(FakeEngine):
    """FakeEngine with a bounded decode arena (decode_capacity, decode_pages, and decode_rows
    from a typical prompt's tokens) keeping the prompts' KV pages of each generating batch it
    runs."""

    CAPACITY = 300

    def __init__(self):
        super().__init__()
        self.batches: list[list[int]] = []

    def decode_capacity(self):
        return self.CAPACITY, 8

    def decode_pages(self, kv_tokens):
        return [t // 8 + 2 for t in kv_tokens]

    def decode_rows(self, prompt_tokens: int, max_tokens: int) -> int:
        return max(1, self.CAPACITY // self.decode_pages([prompt_tokens + max_tokens])[0])

    def run(self, requests):
        self.batches.append(self.decode_pages([len(r.tokens) + r.readout.max_tokens
                                               for r in requests]))
        return super().run(requests)


def _waves(needs: list[int], capacity: int) -> list[int]:
    """The pages of each wave the decode loop's admission fills from `needs` in order."""
    waves = [0]
    for need in needs:
        if waves[-1] + need > capacity:
            waves.append(0)
        waves[-1] += need
    return waves


def _complete(engine, n: int, words: str) -> int:
    """AI_COMPLETE (16 tokens) over `n` distinct rows, each 'doc I' and the SQL `words` of
    row i, through a session on `engine`; the rows answered."""
    import duckdb

    from quail_engine.exec.config import SessionConfig
    from quail_engine.exec.session import QuailSession
    from quail_engine.plan.cost import DeviceSpec

    con = duckdb.connect()
    con.execute(f"CREATE TABLE r AS SELECT i AS id, 'doc ' || i || ' ' || {words} AS review "
                f"FROM range({n}) t(i)")
    s = QuailSession(con, lambda: engine, SessionConfig(use_cache=False, device="cpu"),
                     device_spec=DeviceSpec("toy", 1e11, 1e10))
    return s.execute("SELECT id, AI_COMPLETE('m', review, {'max_tokens': 16}) AS v FROM r",
                     "snowflake").num_rows


def test_generating_batches_end_on_full_waves():
    """Through a session: AI_COMPLETE over rows of several lengths runs in batches of whole
    decode waves, at least DECODE_WAVES of them a batch, counted from the prompts' own tokens:
    no batch but the query's last ends on a wave of a few rows (they would decode alone)."""
    from quail_engine.exec.batch_sizing import DECODE_WAVES

    engine = WaveEngine()
    rows = _complete(engine, 400, "repeat('word ', 3 + i % 29)")
    assert rows == 400 and sum(map(len, engine.batches)) == 400
    assert len(engine.batches) >= 2
    for needs in engine.batches[:-1]:
        waves = _waves(needs, WaveEngine.CAPACITY)
        assert len(waves) >= DECODE_WAVES, waves
        assert min(waves) >= WaveEngine.CAPACITY // 2, waves  # no wave of a few rows alone


class RowsEngine(FakeEngine):
    """FakeEngine whose KV is unbounded (no decode_capacity), as the CPU's: decode_rows answers
    decode at once; keeps the size of each generating batch it runs."""

    def __init__(self):
        super().__init__()
        self.batches: list[int] = []

    def decode_rows(self, prompt_tokens: int, max_tokens: int) -> int:
        return 16

    def run(self, requests):
        self.batches.append(len(requests))
        return super().run(requests)


def test_a_generating_calls_last_rows_under_a_wave_join_its_batch():
    """Where the KV is unbounded (the CPU's), a generating call's rows left after a batch that
    are fewer than one wave of answers (decode_rows) join that batch instead of decoding alone
    after it; more than a wave left runs as a batch of its own."""
    from quail_engine.exec.batch_sizing import DECODE_WAVES

    sizes = {}
    for n in (40, 50):
        engine = RowsEngine()
        _complete(engine, n, "repeat('word ', 120)")
        sizes[n] = engine.batches
    batch = DECODE_WAVES * 16
    assert sizes[40] == [40]  # 32 + 8: the 8 join the first batch
    assert sizes[50] == [batch, 50 - batch]  # 18 left: a batch of their own


class OfferEngine(WaveEngine):
    """WaveEngine taking offers of the next generating batch (infer's Generation.offer): keeps
    the requests offered and those each run got."""

    def __init__(self):
        super().__init__()
        self.offers: list[list] = []
        self.ran: list[list] = []
        self.dropped = 0

    def offer(self, requests):
        self.offers.append(list(requests))

    def drop_carried(self):
        self.dropped += 1

    def run(self, requests):
        self.ran.append(list(requests))
        return super().run(requests)


def test_each_generating_batch_is_offered_while_the_batch_before_runs():
    """Every generating batch after the first is offered to the engine while the batch before
    it runs, as the very requests its own run then gets (so the engine can start its answers as
    the running batch's end), and the call ends by dropping whatever was started of an offer."""
    engine = OfferEngine()
    assert _complete(engine, 400, "repeat('word ', 3 + i % 29)") == 400
    assert len(engine.ran) >= 2
    assert len(engine.offers) == len(engine.ran) - 1
    for offered, ran in zip(engine.offers, engine.ran[1:]):
        assert len(offered) == len(ran) and all(a is b for a, b in zip(offered, ran))
    assert engine.dropped == 1


class FullAnswersEngine(OfferEngine):
    """OfferEngine whose recent answers ran to max_tokens (it reserves max_tokens for them)."""

    def answer_reserve(self, max_tokens, stop=(), grammar=None):
        return max_tokens


def test_answers_that_run_to_max_tokens_are_not_offered():
    """Where recent answers ran to max_tokens (random weights'), a batch's answers end together
    wave by wave and the next batch is not offered early."""
    engine = FullAnswersEngine()
    assert _complete(engine, 400, "repeat('word ', 3 + i % 29)") == 400
    assert len(engine.ran) >= 2 and engine.offers == []
