"""Answer quality of two-argument questions on the embedded default model, and of every example.

  pairs     tests/data/pairs_labelled.jsonl: review x topic, complaint x product, report x
            reaction; a dev split (the pair layout and PAIR_THRESHOLD were chosen on it) and a
            held-out test split (reported only). Each pair is asked with either side as the
            document, as a join anchored on either side would ask it, through OpPrompt exactly as
            the executor renders it; beside it, the yes/no layout used before (calibrated with an
            all-"N/A" prompt) for comparison.
  one-arg   the one-argument filter and classify on tests/data/reviews_labelled.jsonl through
            the same OpPrompt path (unchanged layout; reported to show it is no worse).
  examples  every examples/<dialect>/<query>.sql through QuailSession (what `quail query` runs),
            scored against tests/data/examples_expected.jsonl.

    python -m bench pair-accuracy      # writes bench/results/pair-accuracy.json|md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

from bench.results_io import write_result

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "tests" / "data" / "pairs_labelled.jsonl"
REVIEWS = ROOT / "tests" / "data" / "reviews_labelled.jsonl"
EXPECTED = ROOT / "tests" / "data" / "examples_expected.jsonl"
EXAMPLES = ROOT / "examples"
SHAPES = ("review_topic", "complaint_product", "report_reaction")
ONE_ARG_SQL = """SELECT AI_FILTER(PROMPT('Is this review positive? {0}', review)),
    AI_CLASSIFY(review, ['positive', 'negative']):labels[0]::STRING FROM reviews"""


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class YesNoLayout:
    """The layout two-argument questions had before the pair layout: the partner inline in a
    yes/no question, calibrated with every value "N/A" (kept here only to compare against)."""

    def __init__(self, layout):
        self.layout = layout

    def texts(self, values):
        from quail_engine.exec.prompts import _render
        from quail_engine.infer.prompt_layout import BOOLEAN_HINT, document_text

        vals = [str(v) for v in values]
        doc = "\n\n".join(vals[i] for i in self.layout.doc_slots)
        question = _render(self.layout.op.template, vals, self.layout.doc_slots).strip()
        return document_text(doc), f"Question: {question}\n{BOOLEAN_HINT}"

    def calibration_values(self):
        return ["N/A"] * len(self.layout.op.bindings)

    def readout(self, calibration_tokens):
        from quail_engine.infer.api import BooleanReadout

        return BooleanReadout(calibration_tokens=tuple(calibration_tokens))


def ask(engine, layout, rows: list[tuple]) -> list:
    """Answers for `rows` the way the executor asks them: each distinct document's KV once, each
    row a suffix on it, the readout calibrated as OpRunner calibrates it."""
    from quail_engine.infer.api import Request

    head, tail = engine.chat_split(*layout.texts(layout.calibration_values()))
    readout = layout.readout(head + tail)
    texts = [layout.texts(v) for v in rows]
    prefixes = list(dict.fromkeys(p for p, _ in texts))
    handles = dict(zip(prefixes, engine.add_prefixes([engine.chat_split(p, "")[0]
                                                      for p in prefixes])))
    try:
        return engine.run([Request(tuple(engine.chat_split(p, s)[1]), readout, handles[p])
                           for p, s in texts])
    finally:
        for h in handles.values():
            engine.release(h)


def pair_layout(template: str, anchor: str):
    from quail_engine.exec.prompts import OpPrompt
    from quail_engine.sql.ir import AiOp, Binding

    op = AiOp("ai_join", template, (Binding(0, "a.x", "a", "x"), Binding(1, "b.y", "b", "y")))
    return OpPrompt.with_document(op, anchor)


def accuracy(predicted: list, truth: list) -> float:
    return round(sum(p == t for p, t in zip(predicted, truth)) / len(truth), 4)


def evaluate_pairs(engine, rows: list[dict]) -> dict:
    out: dict = {}
    for split in ("dev", "test"):
        for shape in SHAPES:
            part = [r for r in rows if r["split"] == split and r["shape"] == shape]
            truth = [r["label"] for r in part]
            for anchor in ("a", "b"):
                cell = out.setdefault(f"{split}/{shape}/document={anchor}", {"n": len(part)})
                for name, wrap in (("pair", lambda lay: lay), ("yes_no_before", YesNoLayout)):
                    answers = []
                    for template in dict.fromkeys(r["template"] for r in part):
                        group = [r for r in part if r["template"] == template]
                        answers += ask(engine, wrap(pair_layout(template, anchor)),
                                       [(r["a"], r["b"]) for r in group])
                    predicted = [bool(a.value) for a in answers]
                    cell[name] = accuracy(predicted, truth)
                    cell[f"{name}_yes_rate"] = round(sum(predicted) / len(predicted), 4)
    for split in ("dev", "test"):
        cells = [v for k, v in out.items() if k.startswith(split + "/")]
        out[f"{split}/all"] = {name: round(sum(c[name] for c in cells) / len(cells), 4)
                               for name in ("pair", "yes_no_before")}
    return out


def evaluate_one_arg(engine) -> dict:
    from quail_engine.exec.prompts import OpPrompt
    from quail_engine.exec.sql_values import sql_value
    from quail_engine.sql import parse

    reviews = [r for r in load_jsonl(REVIEWS) if r["kind"] == "review"]
    f_op, c_op = parse(ONE_ARG_SQL, "snowflake").ai_ops
    values = [(r["text"],) for r in reviews]
    f = [sql_value(f_op, a) for a in ask(engine, OpPrompt.for_op(f_op), values)]
    c = [sql_value(c_op, a) for a in ask(engine, OpPrompt.for_op(c_op), values)]
    return {"n": len(reviews),
            "filter": accuracy(f, [r["sentiment"] == "positive" for r in reviews]),
            "classify": accuracy(c, [r["sentiment"] for r in reviews])}


def run_example(engine, name: str, writer=None) -> tuple[list[dict], float]:
    """Rows of example `name` and its seconds; `writer`: the engine that writes generated text
    when it is not `engine` (the product's generation model)."""
    import duckdb

    from quail_engine.exec.session import QuailSession
    from quail_engine.exec.tables import register_table

    dialect = name.split("/")[0]
    con = duckdb.connect()
    for table in ("reviews", "products"):
        register_table(con, table, EXAMPLES / "data" / f"{table}.csv")
    start = time.perf_counter()
    decoder = None
    if writer is not None and writer is not engine:
        from quail_engine.exec.prompt_text import PromptText

        decoder = (PromptText.of_engine(lambda: writer), lambda: writer)
    out = QuailSession(con, lambda: engine, decoder=decoder).execute(
        (EXAMPLES / name).read_text(), dialect)
    return out.to_pylist(), round(time.perf_counter() - start, 2)


def score_example(spec: dict, rows: list[dict]) -> dict:
    exp, check = spec["expected"], spec["check"]
    if check == "filter_label":
        got = {r[spec["id_column"]]: r[spec["label_column"]] for r in rows}
        want = set(exp["ids"])
        labels = [got[i] == exp["labels"][str(i)] for i in got]
        return {"filter": accuracy([i in got for i in range(1, 41)],
                                   [i in want for i in range(1, 41)]),
                "label": round(sum(labels) / max(1, len(labels)), 4), "rows": len(rows)}
    if check == "group_counts":
        got = {(r[spec["group_column"]], r[spec["label_column"]]): r["n"] for r in rows}
        agree = sum(min(e["n"], got.get((e["group"], e["sentiment"]), 0)) for e in exp["rows"])
        return {"label": round(agree / sum(e["n"] for e in exp["rows"]), 4), "rows": len(rows)}
    if check == "filter_text":
        ids = [r[spec["id_column"]] for r in rows]
        texts = [str(r[spec["text_column"]] or "") for r in rows]
        return {"filter": round(len(set(ids) & set(exp["ids"])) / len(exp["ids"]), 4),
                "text_sane": round(sum(_sane(t, exp) for t in texts) / max(1, len(texts)), 4),
                "rows": len(rows), "texts": dict(zip(map(str, ids), texts))}
    if check == "names":
        got = {r[spec["name_column"]] for r in rows}
        return {"accuracy": accuracy([n in got for n in exp["candidates"]],
                                     [n in exp["names"] for n in exp["candidates"]]),
                "rows": len(rows), "names": sorted(got)}
    got = {tuple(r[c] for c in spec["columns"]) for r in rows}
    want = {tuple(p) for p in exp["pairs"]}
    tp = len(got & want)
    return {"precision": round(tp / max(1, len(got)), 4), "recall": round(tp / len(want), 4),
            "accuracy": round(1 - (len(got - want) + len(want - got)) / exp["candidates"], 4),
            "rows": len(rows), "wrong": sorted(map(list, got - want))}


def _sane(text: str, exp: dict) -> bool:
    """A mechanical floor, not a judgement: some words, not too many, on topic for an apology."""
    words = text.split()
    if not words or len(words) > exp["words"]:
        return False
    return exp["text"] != "apology" or any(w in text.lower() for w in ("sorry", "apolog"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--skip-examples", action="store_true")
    ap.add_argument("--generation-model", default="auto",
                    help="the model that writes generated text, as `quail query "
                         "--generation-model` (auto: the product's choice for --model)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    from quail_engine.infer.embedded import decode_model_for
    from quail_engine.infer.factory import load_engine
    from quail_engine.infer.prompt_layout import PAIR_THRESHOLD

    engine = load_engine(args.model, "cpu")
    writes = decode_model_for(args.model, args.generation_model)
    start = time.perf_counter()
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": "python " + " ".join(sys.argv), "model": args.model,
              "generation_model": writes,
              "pair_threshold": PAIR_THRESHOLD,
              "pairs": evaluate_pairs(engine, load_jsonl(PAIRS)),
              "one_arg": evaluate_one_arg(engine), "examples": {}}
    if not args.skip_examples:
        writer = engine if writes == args.model else load_engine(writes, "cpu")
        for spec in load_jsonl(EXPECTED):
            rows, seconds = run_example(engine, spec["example"], writer)
            result["examples"][spec["example"]] = {**score_example(spec, rows),
                                                   "seconds": seconds}
    result["seconds"] = round(time.perf_counter() - start, 1)
    write_result(result, "pair-accuracy", markdown, args.out)
    return 0


def markdown(r: dict) -> str:
    lines = [f"# Two-argument answer accuracy ({r['date']})", "",
             f"`{r['command']}` (model {r['model']}, generated text by "
             f"{r.get('generation_model', r['model'])}, bf16 on CPU, {r['seconds']} s; pair "
             f"threshold {r['pair_threshold']} nats)", "",
             "Pairs (tests/data/pairs_labelled.jsonl, 32 balanced pairs per cell; `document=a`: "
             "the first argument is the shared prefix):", "",
             "| split / shape / document | pair layout | yes/no before | yes rate (pair / before) |",
             "|---|---:|---:|---:|"]
    for key, c in r["pairs"].items():
        if key.endswith("/all"):
            lines.append(f"| **{key}** | **{c['pair']:.3f}** | **{c['yes_no_before']:.3f}** | |")
        else:
            lines.append(f"| {key} | {c['pair']:.3f} | {c['yes_no_before']:.3f} | "
                         f"{c['pair_yes_rate']:.2f} / {c['yes_no_before_yes_rate']:.2f} |")
    o = r["one_arg"]
    lines += ["", f"One-argument filter / classify (tests/data/reviews_labelled.jsonl, n={o['n']}): "
              f"{o['filter']:.3f} / {o['classify']:.3f}", ""]
    if r["examples"]:
        lines += ["Examples (tests/data/examples_expected.jsonl; filter: kept/dropped right of 40 "
                  "reviews; label: labels right among rows; join: pairs right of 320 candidates):",
                  "", "| example | result | rows | s |", "|---|---|---:|---:|"]
        for name, e in r["examples"].items():
            shown = ", ".join(f"{k} {v:.3f}" for k, v in e.items()
                              if isinstance(v, float) and k != "seconds")
            lines.append(f"| {name} | {shown} | {e['rows']} | {e['seconds']} |")
        lines += ["", "Generated texts (read them: `text_sane` is only a mechanical floor):", ""]
        for name, e in r["examples"].items():
            for i, t in e.get("texts", {}).items():
                lines.append(f"- {name} id {i}: {t!r}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
