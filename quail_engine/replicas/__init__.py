"""Scale-out: one engine replica per GPU (or per CPU worker) on Ray, behind the engine request API
(infer/api.py), so the executor drives it as it drives one local engine.

- `sharding.py`: which worker runs which request and holds which prefix (pure; no Ray, no torch);
- `worker.py`: the per-replica actor body (an engine from infer/factory.py);
- `cluster.py`: connecting to Ray (a local cluster or an address) and starting the actors;
- `ray_engine.py`: `RayEngine`, the driver-side engine that shards each batch it is given.

Nothing here imports Ray at module level: a session without `workers`/`ray_address` never
imports it.
"""
