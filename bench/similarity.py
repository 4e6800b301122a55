"""AI_SIMILARITY's ranking on the embedded models: bench/data/similarity.jsonl holds 16 anchors,
each with one text that means the same and two about something else (hand-written). Every
anchor is paired with its three texts and asked through a real session (facade.open_session,
float32 on the CPU, no answer cache) in Databricks' 0..1 range, both argument orders.

Reported per model: the paraphrase ranked above each unrelated text of its anchor (of 32), the
AUC over all paraphrase / unrelated pairs (16 x 32), whether the value is the same in both
argument orders, and each pair's PMI read back through the curve (exec/sql_values.sql_value
inverted; the value's middle and spread are fitted on these same anchors, so no held-out
claim). `--time N` also times an N-row query (the model loaded first, not counted).

    python -m bench similarity [--models default smollm2-135m] [--time 40] [--out FILE]

(`python -m bench.similarity` runs it too.) It writes bench/results/similarity.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from bench.results_io import write_result

DATA = Path(__file__).parent / "data" / "similarity.jsonl"


def load() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def pairs(anchors: list[dict]) -> list[tuple[int, str, str, bool]]:
    """(anchor id, anchor, text, whether the text means the same), three per anchor."""
    return [(i, a["anchor"], b, b == a["same"]) for i, a in enumerate(anchors)
            for b in [a["same"], *a["others"]]]


def query(session, rows: list[tuple[int, str, str, bool]], call: str) -> list[float]:
    values = ", ".join(f"({k}, '{a}', '{b}')" for k, (_, a, b, _) in enumerate(rows))
    sql = f"SELECT k, {call} AS s FROM (VALUES {values}) AS t(k, a, b) ORDER BY k"
    return session.execute(sql, "databricks").column("s").to_pylist()


def pmi(value: float) -> float:
    """The PMI (nats) a 0..1 similarity was read from (sql_value's curve inverted)."""
    from quail_engine.exec.sql_values import SIMILARITY_CENTRE, SIMILARITY_SPREAD

    return SIMILARITY_CENTRE + SIMILARITY_SPREAD * math.log(value / (1.0 - value))


def ranking(rows, scores: list[float]) -> dict:
    """Paraphrase-above-unrelated comparisons within each anchor, and the AUC over all."""
    same = {i: s for (i, _, _, yes), s in zip(rows, scores) if yes}
    others = [(i, s) for (i, _, _, yes), s in zip(rows, scores) if not yes]
    wins = sum(same[i] > s for i, s in others)
    auc = statistics.fmean(float(p > s) + 0.5 * (p == s) for p in same.values()
                           for _, s in others)
    return {"ranked": f"{wins}/{len(others)}", "auc": round(auc, 3)}


def measure(model: str, anchors: list[dict], time_rows: int) -> dict:
    import duckdb

    from quail_engine.exec.facade import SessionConfig, open_session

    config = SessionConfig(model=model, device="cpu", precision="fp32", use_cache=False)
    session = open_session(duckdb.connect(), config)
    rows = pairs(anchors)
    ab = query(session, rows, "ai_similarity(a, b)")
    ba = query(session, rows, "ai_similarity(b, a)")
    out = {"model": model, "a_b": ranking(rows, ab), "b_a": ranking(rows, ba),
           "symmetric": sum(x == y for x, y in zip(ab, ba)), "pairs": len(rows),
           "largest_order_difference": max(abs(x - y) for x, y in zip(ab, ba))}
    p_ab, p_ba = [pmi(v) for v in ab], [pmi(v) for v in ba]
    out["pmi_mean_of_orders"] = ranking(rows, [(x + y) / 2 for x, y in zip(p_ab, p_ba)])
    out["rows"] = [{"anchor": i, "text": b, "same": yes, "a_b": round(x, 4), "b_a": round(y, 4),
                    "pmi_a_b": round(px, 3), "pmi_b_a": round(py, 3)}
                   for (i, _, b, yes), x, y, px, py in zip(rows, ab, ba, p_ab, p_ba)]
    if time_rows:
        timed = (rows * (time_rows // len(rows) + 1))[:time_rows]
        timed = [(i, f"{a} ({k})", f"{b} ({k})", yes) for k, (i, a, b, yes) in enumerate(timed)]
        start = time.perf_counter()
        query(session, timed, "ai_similarity(a, b)")
        out["seconds"] = {"rows": time_rows, "wall_s": round(time.perf_counter() - start, 2)}
    return out


def markdown(result: dict) -> str:
    timed = any("seconds" in m for m in result["models"])
    lines = ["# AI_SIMILARITY ranking (bench/data/similarity.jsonl, fp32 CPU)", "",
             f"`{result['command']}` on {result['machine']}", "",
             "| model | ranked (a, b) | AUC (a, b) | ranked (b, a) | AUC (b, a) | "
             "mean PMI of the orders: ranked, AUC | same value both orders | largest "
             "difference |" + (" wall s |" if timed else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if timed else "")]
    for m in result["models"]:
        t = m.get("seconds", {})
        lines.append(f"| {m['model']} | {m['a_b']['ranked']} | {m['a_b']['auc']} | "
                     f"{m['b_a']['ranked']} | {m['b_a']['auc']} | "
                     f"{m['pmi_mean_of_orders']['ranked']}, {m['pmi_mean_of_orders']['auc']} | "
                     f"{m['symmetric']}/{m['pairs']} | {m['largest_order_difference']:.2g} |"
                     + (f" {t.get('wall_s', '')} ({t.get('rows', '')} rows) |" if timed else ""))
    lines += ["", "Ranked: the paraphrase above each unrelated text of its anchor (16 anchors x 2). "
              "AUC: over all paraphrase / unrelated pairs (16 x 32). The two orders are two "
              "queries over the same rows; a value that differs between them does so by the "
              "engine's float32 batch sensitivity (bench/results/batch-sensitivity.md), the "
              "largest difference in the 0..1 range."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench similarity")
    parser.add_argument("--models", nargs="+", default=["default", "smollm2-135m"])
    parser.add_argument("--time", type=int, default=0, help="rows of a timed query (0: none)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    anchors = load()
    result = {"command": " ".join(["python -m bench similarity", *argv]),
              "models": [measure(m, anchors, args.time) for m in args.models]}
    write_result(result, "similarity", markdown, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
