"""Ray's surface that the driver (quail_engine/replicas/ray_engine.RayEngine) uses, stood in by
actors called in process, for unit tests of the driver and its workers' code as they are."""

from __future__ import annotations

from typing import Any


class DeadWorker(Exception):
    """Every Ray error type the driver catches, as one (a test raises it as a worker's death)."""


class FakeRay:
    """`get` of results computed at `.remote()`, `kill`, and Ray's exception types."""

    class exceptions:
        RayActorError = WorkerCrashedError = ObjectLostError = RayTaskError = DeadWorker

    @staticmethod
    def get(refs):
        return refs

    @staticmethod
    def kill(actor) -> None:
        pass


class _Remote:
    def __init__(self, method):
        self.remote = method


class FakeActor:
    """An EngineWorker called in process, each of its methods behind `.remote`; those named in
    `dead` raise DeadWorker (the worker's process gone)."""

    def __init__(self, body: Any, dead: tuple[str, ...] = ()):
        self.body, self._dead = body, dead

    def __getattr__(self, name: str) -> _Remote:
        if name in self._dead:
            def died(*args, **kwargs):
                raise DeadWorker("the worker's process exited")
            return _Remote(died)
        return _Remote(getattr(self.body, name))


def fake_replicas(monkeypatch, engines, precision: str = "bf16",
                  dead: dict[int, tuple[str, ...]] | None = None):
    """A RayEngine over one in-process worker per engine of `engines` (what the worker's
    load_engine returns there); `dead`: worker index -> methods that find it dead."""
    from quail_engine.replicas import worker
    from quail_engine.replicas.ray_engine import RayEngine

    pending = list(engines)
    monkeypatch.setattr(worker, "load_engine", lambda spec, **kwargs: pending.pop(0))
    actors = [FakeActor(worker.EngineWorker(i, "fake", "cpu", precision, {}),
                        (dead or {}).get(i, ())) for i in range(len(engines))]
    return RayEngine(FakeRay(), actors, "fake")
