"""What the host does while the engine waits between operator calls: QUAIL-B queries run whole
through the product's session (the timed table's suite: random-weight model, the override), with
wall-clock timers around the executor's steps that sit between one call's last engine batch and
the next call's first (answer-cache reads and writes, cached-first ordering, question stems,
anchor chunking, document releases, the engine's prefix extension and its forward passes),
kept apart by thread (the host's, the engine's). Beside them, the timeline's engine gaps
(engine_gaps.py).

    python -m bench.probes.call_setup --ids IMDB-8,BIO-3 --workdir /tmp/quail-e2e   # the GPU
    python -m bench.probes.call_setup --ids IMDB-8 --replay      # the CPU replay's host side
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import threading
import time
from collections import defaultdict
from pathlib import Path

from bench.probes.engine_gaps import engine_gaps
from quail_testing.quailb.queries import QUERIES

TIMED = {  # module path -> (owner name or "", attribute)
    "quail_engine.exec.op_runner": [("OpRunner", "answer"), ("OpRunner", "cached_first"),
                                    ("OpRunner", "_share_stem"), ("OpRunner", "_store")],
    "quail_engine.exec.batch_pipeline": [("BatchPipeline", "_prepare"),
                                         ("BatchPipeline", "_count_minimum"),
                                         ("BatchPipeline", "_execute")],
    "quail_engine.exec.answer_cache": [("AnswerCache", "get_many"),
                                       ("AnswerCache", "put_many")],
    "quail_engine.exec.join_runner": [("", "anchor_chunks"), ("", "ask_pairs")],
    "quail_engine.exec.doc_kv": [("DocKV", "release"), ("DocKV", "ensure"),
                                 ("DocKV", "_extend"), ("DocKV", "tokenize")],
    "quail_engine.infer.engine": [("LocalEngine", "extend_prefixes"),
                                  ("LocalEngine", "add_prefixes"), ("LocalEngine", "run")],
    "quail_engine.infer.gpu.runner": [("GpuRunner", "run"), ("GpuRunner", "_run_pass")],
    "quail_engine.infer.gpu.paged_kv": [("PagedKVArena", "extend")],
    "quail_engine.infer.gpu.batch": [("", "pack")],
}


class Timers:
    def __init__(self):
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)
        self.calls: dict[tuple[str, str], int] = defaultdict(int)
        self._depth = threading.local()

    def wrap(self, name: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            thread = "engine" if threading.current_thread().name.startswith("quail-engine") \
                else "host"
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[(thread, name)] += time.perf_counter() - t0
                self.calls[(thread, name)] += 1
        return timed

    def install(self) -> None:
        import importlib

        for module_name, names in TIMED.items():
            module = importlib.import_module(module_name)
            for owner_name, attr in names:
                owner = getattr(module, owner_name) if owner_name else module
                setattr(owner, attr, self.wrap(f"{owner_name or module_name.split('.')[-1]}"
                                               f".{attr}", getattr(owner, attr)))
        # modules that imported `pack` by name
        from quail_engine.infer.gpu import model as gpu_model
        gpu_model.pack = self.wrap("batch.pack", gpu_model.pack)

    def take(self) -> dict:
        out = {f"{t}:{n}": (round(s, 3), self.calls[(t, n)])
               for (t, n), s in sorted(self.seconds.items(), key=lambda kv: -kv[1])}
        self.seconds.clear()
        self.calls.clear()
        return out


def _replay_suite(workdir: Path):
    from bench.probes.host_overhead import packing_engine
    from bench.quailb.resol import ROOT, replay_model
    from quail_engine.infer import factory
    from quail_testing.quailb.suite import open_suite

    factory.load_engine = lambda spec, device="cpu", precision="bf16", tokenizer=None, **_: \
        packing_engine(spec, 5947, tokenizer)
    suite = open_suite(workdir, "0.1", model=str(replay_model(workdir, ROOT / ".carry" / "e2e")),
                       override=True, ledger=False)
    suite.load()
    return suite


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", default="IMDB-8,BIO-3")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/quail-e2e"))
    ap.add_argument("--replay", action="store_true", help="the CPU replay (fake forward)")
    ap.add_argument("--random-model", default="qwen3-4b")
    ap.add_argument("--scale", default="0.1")
    ap.add_argument("--precision", default="fp8")
    ap.add_argument("--first", type=int, default=0)
    args = ap.parse_args(argv)
    timers = Timers()
    timers.install()
    if args.replay:
        suite = _replay_suite(args.workdir)
    else:
        from bench.probes.profile_query import device_suite

        suite = device_suite(args)
    out = {}
    try:
        for qid in args.ids.split(","):
            timers.take()
            t0 = time.perf_counter()
            row = suite.run(QUERIES[qid])
            out[qid] = {"wall_s": round(time.perf_counter() - t0, 3),
                        "run_s": row.get("run_s"), "error": row.get("error"),
                        "gaps": engine_gaps(suite.last_report or {}), "timers": timers.take()}
            print(qid, json.dumps(out[qid]), flush=True)
    finally:
        shutil.rmtree(args.workdir / "answers", ignore_errors=True)
    import os

    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "call_setup.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
