"""Re-derive the speed of light of measured QUAIL-B rows without the GPU: replay each query on
the CPU through the same bench path (override and token ledger over the GPU engine's host side,
bench/probes/host_overhead.packing_engine: a tiny model whose forward only packs the batch), take
the ledger's minimum work, and price it on the H200 for the Qwen3-4B shape as the device run
would (gpu_table._speed_of_light). Used when the minimum's pricing changes after rows were
measured (2026-12-02: a prefix's KV read once for all its requests, ledger.py). A row is updated
only when the replay asked the same minimum tokens as the device did (or within --tolerance,
noted in the row: prompts changed since a row was measured); the others are listed.

    python -m bench.quailb.resol --result bench/results/quailb-gpu.json [--only BIO-2,...] --write

`--anchor-only`: leave our speed of light as it is and add the replay's work counts
(`min_work`) and the anchor's speed of light of them (`sol_quailb_s`, `x_sol_quailb`:
sol_quailb.py) to rows measured before the rows carried their work counts.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.quailb.gpu_table import _specs, _speed_of_light, markdown, totals
from quail_testing.quailb.queries import QUERIES
from quail_testing.quailb.suite import open_suite

ROOT = Path(__file__).resolve().parents[2]

QWEN3_4B_CONTEXT = 40960  # the device run's model; the tiny replay model gets the same context


def specs(precision: str):
    """(model, datasheet, sustained) of the device run: the Qwen3-4B shape on the H200, priced
    as gpu_table prices the device's engine."""
    from types import SimpleNamespace

    from quail_engine.infer.models import config_from_hf
    from quail_testing.model_dir import VOCAB, qwen3_4b_config

    engine = SimpleNamespace(config=config_from_hf(qwen3_4b_config(VOCAB)), model_id="qwen3-4b")
    return _specs(engine, precision)


def replay_model(workdir: Path, carry: Path) -> Path:
    """A tiny random model directory with the device run's tokenizer and context length."""
    from quail_testing.model_dir import write_model_dir

    path = workdir / "model-tiny"
    write_model_dir(path, carry / "tok", True, "cpu", 0)
    config = json.loads((path / "config.json").read_text())
    config["max_position_embeddings"] = QWEN3_4B_CONTEXT
    (path / "config.json").write_text(json.dumps(config, indent=1))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--result", type=Path, default=ROOT / "bench/results/quailb-gpu.json")
    ap.add_argument("--only", default="", help="comma-separated ids (default: every row run)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/quail-resol"))
    ap.add_argument("--carry", type=Path, default=ROOT / ".carry" / "e2e")
    ap.add_argument("--pages", type=int, default=5947, help="KV arena pages (the device run's)")
    ap.add_argument("--tolerance", type=float, default=0.0,
                    help="re-price a row whose replay's minimum tokens differ by at most this "
                         "fraction (noted in the row); default: only equal ones")
    ap.add_argument("--write", action="store_true", help="update --result and its markdown")
    ap.add_argument("--anchor-only", action="store_true",
                    help="add min_work and the anchor's speed of light; keep sol_s as it is")
    args = ap.parse_args(argv)

    from bench.probes.host_overhead import packing_engine
    from quail_engine.infer import factory

    result = json.loads(args.result.read_text())
    wanted = set(filter(None, args.only.split(",")))
    rows = [r for r in result["queries"] if "run_s" in r and r["dialect"] == "snowflake"
            and (not wanted or r["id"] in wanted)]
    factory.load_engine = lambda spec, device="cpu", precision="bf16", tokenizer=None, **_: \
        packing_engine(spec, args.pages, tokenizer)
    suite = open_suite(args.workdir, result["scale"], model=str(replay_model(args.workdir,
                                                                             args.carry)),
                       override=bool(result["override"]), ledger=True,
                       sample={t: n for t, (n, _) in result.get("sample", {}).items()})
    engine, model_specs, differ = suite.load(), specs(result["precision"]), []
    for row in rows:
        t0 = time.perf_counter()
        replay = suite.run(QUERIES[row["id"]])
        minimum = engine.minimum()
        # (rows compared by count: the digest's method changed in session 10)
        drift = abs(minimum.tokens - row["min_tokens"]) / max(1, row["min_tokens"])
        same = drift <= args.tolerance and replay.get("rows") == row.get("rows")
        priced, before = dict(row), row["sol_s"]
        _speed_of_light(priced, minimum, model_specs)
        if same and args.anchor_only:
            row.update({k: priced[k] for k in ("min_work", "sol_quailb_s", "x_sol_quailb")
                        if k in priced})
            row["sol_quailb_note"] = ("work counts from bench/quailb/resol.py's CPU replay "
                                      "(the same minimum tokens as the device run)")
        elif same:
            note = "re-priced by bench/quailb/resol.py (a prefix's KV read once for all its " \
                   "requests)"
            if minimum.tokens != row["min_tokens"]:  # the device's prompts were a little other
                note += (f" on the replay's minimum of {minimum.tokens:,} tokens (the device "
                         f"run's prompts gave {row['min_tokens']:,})")
                priced.update(min_tokens=row["min_tokens"], prompts=row.get("prompts"))
            row.update(priced, sol_note=note)
        else:
            differ.append(row["id"])
        print(f"{row['id']}: min tokens {minimum.tokens:,} (device {row['min_tokens']:,}), "
              f"rows {replay.get('rows', replay.get('error'))} (device {row.get('rows')}); "
              f"sol {before:.4g}"
              f" -> {priced['sol_s']:.4g} s, x_sol {priced.get('x_sol')}, x_sol_quailb "
              f"{priced.get('x_sol_quailb')}"
              f"{'' if same else ' (not written: the replay differs)'}; "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    result["totals"] = totals(result["queries"])
    print("suite:", json.dumps(result["totals"]), "| not re-priced:", differ or "none")
    if args.write:
        args.result.write_text(json.dumps(result, indent=1))
        args.result.with_suffix(".md").write_text(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
