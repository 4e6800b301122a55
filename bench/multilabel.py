"""Multi-label classification on the embedded default model: per-label precision and recall and
exact-set accuracy on bench/data/multilabel.jsonl (80 short reviews, each with the subset of
price / quality / delivery / customer service it mentions; bench/multilabel_data.py writes it).

  margins   each label's decision asked in both layouts a multi-label op can use
            (exec/prompts.py OpPrompt.decisions): the label's likelihood after "Does the text
            above mention" (pair, span PMI in nats) and the yes/no question per label (calibrated
            margin), one prefill per review. A threshold per layout is chosen on the odd ids
            (dev, best micro F1) and reported on the even ids (test), beside the product's
            MULTI_LABEL_THRESHOLD and the two-argument filters' PAIR_THRESHOLD (pair layout)
            and 0, the calibrated yes/no decision (yes/no).
  product   the Snowflake query below through a real session (facade.open_session, float32 on
            the CPU, no answer cache): what `quail query` returns, scored the same way.

    python -m bench multilabel      # writes bench/results/multilabel.json|md
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import time
from pathlib import Path

from bench.results_io import RESULTS, write_result

DATA = Path(__file__).parent / "data" / "multilabel.jsonl"
LABELS = ("price", "quality", "delivery", "customer service")
SQL = ("SELECT id, AI_CLASSIFY(text, ['price', 'quality', 'delivery', 'customer service'], "
       "{'output_mode': 'multi'}):labels AS labels FROM reviews ORDER BY id")
GRID = [x / 4 for x in range(-16, 41)]  # thresholds tried on dev: -4 .. 10 by 0.25


def load() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def margins(engine, layout, texts: list[str]) -> dict[str, list[float]]:
    """Per label, each text's decision margin before any threshold, asked as the executor asks
    it: each document's KV once, every label a suffix on it, yes/no calibrated per label."""
    from quail_engine.infer.api import Request, SpanReadout

    def readout(label: str):
        ro = layout.readout(tuple(sum(engine.chat_split(*layout.label_calibration(label)), [])))
        return dataclasses.replace(ro, threshold=0.0) if isinstance(ro, SpanReadout) else ro

    readouts = {label: readout(label) for label in LABELS}
    handles = engine.add_prefixes([engine.chat_split(layout.texts((t, "x"))[0], "")[0]
                                   for t in texts])
    try:
        requests = [Request(tuple(engine.chat_split(*layout.texts((t, label)))[1]),
                            readouts[label], h) for t, h in zip(texts, handles) for label in LABELS]
        answers = engine.run(requests)
    finally:
        for h in handles:
            engine.release(h)
    return {label: [a.margin for a in answers[k::len(LABELS)]] for k, label in enumerate(LABELS)}


def score(predicted: list[set], truth: list[set]) -> dict:
    """Per-label precision / recall, micro F1 and exact-set accuracy."""
    out: dict = {"n": len(truth)}
    tp_all = fp_all = fn_all = 0
    for label in LABELS:
        tp = sum(label in p and label in t for p, t in zip(predicted, truth))
        fp = sum(label in p and label not in t for p, t in zip(predicted, truth))
        fn = sum(label not in p and label in t for p, t in zip(predicted, truth))
        out[label] = {"precision": round(tp / max(1, tp + fp), 3),
                      "recall": round(tp / max(1, tp + fn), 3)}
        tp_all, fp_all, fn_all = tp_all + tp, fp_all + fp, fn_all + fn
    out["micro_f1"] = round(2 * tp_all / max(1, 2 * tp_all + fp_all + fn_all), 3)
    out["exact"] = round(sum(p == t for p, t in zip(predicted, truth)) / len(truth), 3)
    return out


def at(m: dict[str, list[float]], rows: list[int], threshold: float) -> list[set]:
    return [{label for label in LABELS if m[label][i] > threshold} for i in rows]


def evaluate_layout(m: dict[str, list[float]], truth: list[set],
                    compared: tuple[float, ...]) -> dict:
    dev = [i for i in range(len(truth)) if i % 2 == 0]  # ids 1, 3, ... (rows sorted by id)
    test = [i for i in range(len(truth)) if i % 2 == 1]
    dev_truth, test_truth = [truth[i] for i in dev], [truth[i] for i in test]
    best = max(GRID, key=lambda t: (score(at(m, dev, t), dev_truth)["micro_f1"], -abs(t)))
    return {"chosen_on_dev": best, "dev_at_chosen": score(at(m, dev, best), dev_truth),
            "test_at_chosen": score(at(m, test, best), test_truth),
            "test_at": {str(t): score(at(m, test, t), test_truth) for t in compared},
            "auc": {label: auc(m[label], [label in t for t in truth]) for label in LABELS}}


def auc(values: list[float], positive: list[bool]) -> float:
    pos = [v for v, p in zip(values, positive) if p]
    neg = [v for v, p in zip(values, positive) if not p]
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return round(wins / max(1, len(pos) * len(neg)), 3)


def product(config, engine, rows: list[dict]) -> tuple[list[set], float]:
    """The labels a real session returns for SQL, and its seconds."""
    import pyarrow as pa

    from quail_engine.exec.facade import connect, open_session

    con = connect()
    table = pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]})
    con.register("reviews", table)
    session = open_session(con, config, engine_factory=lambda: engine)
    start = time.perf_counter()
    out = session.execute(SQL, "snowflake").to_pylist()
    seconds = time.perf_counter() - start
    return [set(json.loads(r["labels"]) if isinstance(r["labels"], str) else r["labels"])
            for r in out], round(seconds, 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(RESULTS / "multilabel.json"))
    args = ap.parse_args(argv)

    from quail_engine.exec.facade import SessionConfig, load_engine
    from quail_engine.exec.prompts import MULTI_LABEL_THRESHOLD, OpPrompt
    from quail_engine.infer.prompt_layout import PAIR_THRESHOLD
    from quail_engine.sql import parse

    config = SessionConfig(model="default", device="cpu", precision="fp32", use_cache=False)
    engine = load_engine(config)
    rows = sorted(load(), key=lambda r: r["id"])
    truth = [set(r["labels"]) for r in rows]
    op = parse(SQL, "snowflake").ai_ops[0]
    texts = [r["text"] for r in rows]
    start = time.perf_counter()
    layouts = {"pair": (OpPrompt.for_op(op, pair=True).decisions(),
                        (MULTI_LABEL_THRESHOLD, PAIR_THRESHOLD)),
               "yes_no": (OpPrompt.for_op(op, pair=False).decisions(), (0.0,))}
    result: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "command": "python " + " ".join(sys.argv), "model": "default (fp32, CPU)",
                    "n": len(rows), "layouts": {}}
    for name, (layout, compared) in layouts.items():
        result["layouts"][name] = evaluate_layout(margins(engine, layout, texts), truth, compared)
    result["margins_seconds"] = round(time.perf_counter() - start, 1)
    got, seconds = product(config, engine, rows)
    test = [i for i in range(len(rows)) if i % 2 == 1]
    result["product"] = {"sql": SQL, "threshold": MULTI_LABEL_THRESHOLD, "seconds": seconds,
                         "test": score([got[i] for i in test], [truth[i] for i in test]),
                         "all": score(got, truth),
                         "empty_sets": sum(not g for g in got)}
    write_result(result, "multilabel", markdown, args.out)
    return 0


def _row(name: str, s: dict) -> str:
    cells = " | ".join(f"{s[label]['precision']:.2f} / {s[label]['recall']:.2f}"
                       for label in LABELS)
    return f"| {name} | {cells} | {s['micro_f1']:.3f} | {s['exact']:.3f} | {s['n']} |"


def markdown(r: dict) -> str:
    head = " | ".join(f"{label} P / R" for label in LABELS)
    lines = [f"# Multi-label classification ({r['date']})", "",
             f"`{r['command']}`, model {r['model']}, bench/data/multilabel.jsonl ({r['n']} "
             "reviews; dev = odd ids, test = even ids).", "",
             f"| run | {head} | micro F1 | exact set | n |",
             "|---|" + "---:|" * (len(LABELS) + 3)]
    for name, lay in r["layouts"].items():
        lines.append(_row(f"{name}, threshold {lay['chosen_on_dev']} (chosen on dev), dev",
                          lay["dev_at_chosen"]))
        lines.append(_row(f"{name}, threshold {lay['chosen_on_dev']} (chosen on dev), test",
                          lay["test_at_chosen"]))
        for t, s in lay["test_at"].items():
            lines.append(_row(f"{name}, threshold {t}, test", s))
    p = r["product"]
    lines.append(_row(f"**product** (`quail` session, pair, {p['threshold']}), test", p["test"]))
    lines.append(_row(f"**product** (`quail` session, pair, {p['threshold']}), all", p["all"]))
    lines += ["", "Per-label AUC of the margins (0.5 = chance): " + "; ".join(
        f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in lay["auc"].items())
        for name, lay in r["layouts"].items()), "",
        f"Product query: `{p['sql']}` ({p['seconds']} s for {r['n']} rows; "
        f"{p['empty_sets']} rows with no label). Margins of both layouts: "
        f"{r['margins_seconds']} s.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
