"""The Ray driver (quail_engine/replicas/ray_engine.RayEngine) as the executor reads it: how
many answers its workers decode at once, the sum of each replica engine's `decode_rows`, so a
batch of generating rows holds every worker's arena-fulls (a batch sized by its prompts' tokens
alone gave each GPU a fraction of the answers its arena decodes together); and the counters the
report reads, summed over the workers. Ray is replaced by a stand-in that calls the actors in
process (quail_testing/ray_fakes.py): the driver's and the workers' code run as they are."""

from __future__ import annotations

from quail_engine.exec.batch_sizing import BatchSizer
from quail_engine.infer.api import (
    Answer,
    BooleanReadout,
    EngineStats,
    GenerateReadout,
    Request,
)
from quail_testing.ray_fakes import fake_replicas


class Engine:
    """A replica's engine: `rows` answers of any length fit at once (None: it does not say)."""

    model_id, max_context, config = "fake", 4096, None

    def __init__(self, rows: int | None):
        self.rows, self.asked = rows, []

    def decode_rows(self, prompt_tokens: int, max_tokens: int) -> int | None:
        self.asked.append((prompt_tokens, max_tokens))
        return self.rows


class NoDecode:
    model_id, max_context, config = "fake", 4096, None


def test_the_replicas_decode_the_sum_of_their_engines_rows(monkeypatch):
    engines = [Engine(300), Engine(280)]
    ray_engine = fake_replicas(monkeypatch, engines)
    assert ray_engine.decode_rows(339, 48) == 580
    assert [e.asked for e in engines] == [[(339, 48)], [(339, 48)]]
    # a generating batch then holds the batching's waves of every worker's answers
    sizer = BatchSizer()
    waves = sizer.batching.decode_waves
    assert sizer.decode_rows(ray_engine, GenerateReadout(max_tokens=48), 339) == waves * 580
    assert sizer.decode_rows(engines[0], GenerateReadout(max_tokens=48), 339) == waves * 300


def test_no_count_where_a_replica_cannot_say_or_a_worker_is_dead(monkeypatch):
    assert fake_replicas(monkeypatch, [Engine(300), Engine(None)]).decode_rows(339, 48) is None
    assert fake_replicas(monkeypatch, [Engine(300), NoDecode()]).decode_rows(339, 48) is None
    dead = fake_replicas(monkeypatch, [Engine(300), Engine(280)], dead={1: ("decode_rows",)})
    assert dead.decode_rows(339, 48) is None


class Counting(Engine):
    """A replica's engine that answers every request True and counts what its runs did: each
    request's tokens, half of them read from shared KV, and an allocator retry a call."""

    def __init__(self):
        super().__init__(None)
        self.stats = EngineStats()

    def run(self, requests):
        for r in requests:
            self.stats.requested_tokens += len(r.tokens)
            self.stats.kv_hit_tokens += len(r.tokens) // 2
            self.stats.fresh_tokens += len(r.tokens) - len(r.tokens) // 2
        self.stats.alloc_retries += 1
        return [Answer(True, 1.0, 5.0) for _ in requests]


def test_the_driver_counts_the_workers_kv_hits_and_allocator_retries(monkeypatch):
    """The executor's report reads the driver's stats: the KV the workers read from their
    prefix caches, and their allocators' retries, sum over the workers as tokens do."""
    engines = [Counting(), Counting()]
    ray_engine = fake_replicas(monkeypatch, engines)
    requests = [Request(tuple(range(10 + i)), BooleanReadout()) for i in range(8)]
    assert [a.value for a in ray_engine.run(requests)] == [True] * 8
    assert all(e.stats.alloc_retries == 1 for e in engines)  # both workers got a shard
    hits = sum(len(r.tokens) // 2 for r in requests)
    assert ray_engine.stats.kv_hit_tokens == hits > 0
    assert ray_engine.stats.alloc_retries == 2
    assert ray_engine.stats.requested_tokens == sum(len(r.tokens) for r in requests)
