"""Connecting to Ray and starting the engine replicas.

`connect(address)`: a local Ray instance on this host (address None), or an existing cluster
("host:port" of its head, "ray://host:port", or "auto"); a Ray already initialized in this
process (a test's cluster, a notebook's) is used as it is. An address that does not answer is a
one-line ClusterError within CONNECT_TIMEOUT_S (Ray itself would retry for minutes).

`start_workers(...)`: one actor per replica. On a cuda device each takes one GPU, or an equal
share of the GPUs when there are more workers than GPUs (N workers on one GPU); on the CPU each
takes an equal share of the CPUs, which Ray passes on as its OMP_NUM_THREADS.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from quail_engine.errors import QuailError
from quail_engine.replicas.worker import EngineWorker
from quail_engine.settings import Device, cpu_threads

log = logging.getLogger(__name__)
stage = logging.getLogger("quail_engine.stage")
CONNECT_TIMEOUT_S = 10.0
# Ray runs its workers at nice 15 by default; the replicas are the query's compute, as the
# single-process engine is, so a local instance runs them at the driver's priority (on a shared
# host, nice 15 workers ran several times slower than the same work in the driver)
LOCAL_SYSTEM_CONFIG = {"worker_niceness": 0}


class ClusterError(QuailError):
    """The Ray cluster cannot be reached, or has no room for the workers asked for."""


def _head(address: str) -> tuple[str, int] | None:
    """(host, port) to probe for `address`, None when there is nothing to probe ("auto")."""
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """A ClusterError unless the head at `address` accepts a TCP connection within `timeout`."""
    head = _head(address)
    if head is None:
        return
    try:
        socket.create_connection(head, timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address!r}: {exc} "
                           "(is `ray start --head` running there?)") from None


def connect(address: str | None) -> Any:
    """The `ray` module, initialized: on `address`, or a new local instance."""
    try:
        import ray  # an optional extra, imported only for --workers / --ray-address
    except ImportError:
        raise ClusterError("--workers/--ray-address need Ray: pip install 'dbt-quail[ray]'"
                           ) from None
    if ray.is_initialized():
        return ray
    if address:
        check_reachable(address)
    stage.info("starting Ray (%s)", address or "a local instance")
    # logging_level ERROR: Ray's own start-up lines (its token-auth notice, "Started a local Ray
    # instance") would land on the user's terminal between quail's stage lines
    try:
        if address:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        else:
            ray.init(num_cpus=cpu_threads(), include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR, _system_config=LOCAL_SYSTEM_CONFIG)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        raise ClusterError(f"cannot start Ray on {address or 'this host'}: "
                           f"{' '.join(str(exc).split())[:200]}") from None
    return ray


def default_workers(ray: Any, on_gpu: bool) -> int:
    """Workers when none are asked for: one per GPU of the cluster, else one per node."""
    if on_gpu:
        return max(1, int(ray.cluster_resources().get("GPU", 0)))
    return max(1, sum(1 for n in ray.nodes() if n.get("Alive")))


def actor_resources(ray: Any, workers: int, on_gpu: bool) -> dict[str, float]:
    """Ray resources of one replica (see the module docstring)."""
    total = ray.cluster_resources()
    if on_gpu:
        gpus = float(total.get("GPU", 0))
        if gpus <= 0:
            raise ClusterError("a cuda device was asked for, but the Ray cluster has no GPU")
        return {"num_gpus": 1.0 if gpus >= workers else gpus / workers, "num_cpus": 1}
    return {"num_cpus": max(1, int(total.get("CPU", 1)) // workers)}


def start_workers(ray: Any, workers: int, spec: str, device: Device, precision: str,
                  engine_kwargs: dict[str, Any]) -> list:
    """`workers` EngineWorker actors (constructed; their models load in parallel)."""
    resources = actor_resources(ray, workers, device.is_cuda)
    total = ray.cluster_resources()  # busy ones free up (the actors wait); too few never do
    for key, name in (("num_cpus", "CPU"), ("num_gpus", "GPU")):
        need = resources.get(key, 0) * workers
        if need > total.get(name, 0) + 1e-9:
            raise ClusterError(f"the Ray cluster has {total.get(name, 0):g} {name}s; "
                               f"{workers} workers need {need:g}")
    actor = ray.remote(max_restarts=0, max_task_retries=0, **resources)(EngineWorker)
    log.info("starting %d engine workers (%s each)", workers, resources)
    return [actor.remote(i, spec, "cuda:0" if device.is_cuda else "cpu", precision,
                         engine_kwargs)
            for i in range(workers)]
