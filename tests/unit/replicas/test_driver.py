"""The Ray driver (quail_engine/replicas/ray_engine.RayEngine) as the executor reads it: how
many answers its workers decode at once, the sum of each replica engine's `decode_rows`, so a
batch of generating rows holds every worker's arena-fulls (a batch sized by its prompts' tokens
alone gave each GPU a fraction of the answers its arena decodes together); and the counters the
report reads, summed over the workers. Ray is replaced by a stand-in that calls the actors in
process: the driver's and the workers' code run as they are."""

from __future__ import annotations

from quail_engine.exec.batch_sizing import BatchSizer
from quail_engine.infer.api import GenerateReadout
from quail_engine.replicas import worker
from quail_engine.replicas.ray_engine import RayEngine


class _Dead(Exception):
    pass


class FakeRay:
    class exceptions:
        RayActorError = WorkerCrashedError = ObjectLostError = RayTaskError = _Dead

    @staticmethod
    def get(refs):
        return refs


class _Remote:
    def __init__(self, method):
        self.remote = method


class FakeActor:
    def __init__(self, body: worker.EngineWorker, dead: bool = False):
        self.info = _Remote(body.info)
        self.decode_rows = _Remote(self._dead if dead else body.decode_rows)

    @staticmethod
    def _dead(*args):
        raise _Dead("the worker's process exited")


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


def replicas(monkeypatch, engines, dead=()) -> RayEngine:
    pending = list(engines)
    monkeypatch.setattr(worker, "load_engine", lambda spec, **kwargs: pending.pop(0))
    actors = [FakeActor(worker.EngineWorker(i, "fake", "cpu", "bf16", {}), dead=i in dead)
              for i in range(len(engines))]
    return RayEngine(FakeRay(), actors, "fake")


def test_the_replicas_decode_the_sum_of_their_engines_rows(monkeypatch):
    engines = [Engine(300), Engine(280)]
    ray_engine = replicas(monkeypatch, engines)
    assert ray_engine.decode_rows(339, 48) == 580
    assert [e.asked for e in engines] == [[(339, 48)], [(339, 48)]]
    # a generating batch then holds the batching's waves of every worker's answers
    sizer = BatchSizer()
    waves = sizer.batching.decode_waves
    assert sizer.decode_rows(ray_engine, GenerateReadout(max_tokens=48), 339) == waves * 580
    assert sizer.decode_rows(engines[0], GenerateReadout(max_tokens=48), 339) == waves * 300


def test_no_count_where_a_replica_cannot_say_or_a_worker_is_dead(monkeypatch):
    assert replicas(monkeypatch, [Engine(300), Engine(None)]).decode_rows(339, 48) is None
    assert replicas(monkeypatch, [Engine(300), NoDecode()]).decode_rows(339, 48) is None
    assert replicas(monkeypatch, [Engine(300), Engine(280)], dead={1}).decode_rows(339, 48) \
        is None


class Counting(Engine):
    """A replica's engine that answers every request True and counts what its runs did: each
    request's tokens, half of them read from shared KV, and an allocator retry a call."""

    def __init__(self):
        super().__init__(None)
        from quail_engine.infer.api import EngineStats

        self.stats = EngineStats()

    def run(self, requests):
        from quail_engine.infer.api import Answer

        for r in requests:
            self.stats.requested_tokens += len(r.tokens)
            self.stats.kv_hit_tokens += len(r.tokens) // 2
            self.stats.fresh_tokens += len(r.tokens) - len(r.tokens) // 2
        self.stats.alloc_retries += 1
        return [Answer(True, 1.0, 5.0) for _ in requests]


def test_the_driver_counts_the_workers_kv_hits_and_allocator_retries(monkeypatch):
    """The executor's report reads the driver's stats: the KV the workers read from their
    prefix caches, and their allocators' retries, sum over the workers as tokens do."""
    from quail_engine.infer.api import BooleanReadout, Request

    class RunActor(FakeActor):
        def __init__(self, body):
            super().__init__(body)
            self.run, self.release = _Remote(body.run), _Remote(body.release)

    engines = [Counting(), Counting()]
    pending = list(engines)
    monkeypatch.setattr(worker, "load_engine", lambda spec, **kwargs: pending.pop(0))
    actors = [RunActor(worker.EngineWorker(i, "fake", "cpu", "bf16", {})) for i in range(2)]
    ray_engine = RayEngine(FakeRay(), actors, "fake")
    requests = [Request(tuple(range(10 + i)), BooleanReadout()) for i in range(8)]
    assert [a.value for a in ray_engine.run(requests)] == [True] * 8
    assert all(e.stats.alloc_retries == 1 for e in engines)  # both workers got a shard
    hits = sum(len(r.tokens) // 2 for r in requests)
    assert ray_engine.stats.kv_hit_tokens == hits > 0
    assert ray_engine.stats.alloc_retries == 2
    assert ray_engine.stats.requested_tokens == sum(len(r.tokens) for r in requests)
