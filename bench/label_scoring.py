"""How a label set whose labels' case variants share a first token is scored: the rule before
LABEL_RULE 2 (every label's spellings teacher-forced, because " IN" begins both "INFECTIONS" and
"INJURY") against the rule now (the shared token dropped, each label read from its own first
tokens in the prompt's one pass: infer/readout._owned_firsts), on labelled data, through a real
session on the CPU in float32.

Data: bench/data/organ_classes.jsonl, 78 adverse-reaction terms with the MedDRA system organ
class each belongs to (three a class, every one of the 26 classes of QUAIL-B's BIO-5 and BIO-6;
written for this bench from MedDRA's primary classes of common preferred terms). Query: BIO-5's
own (quail_testing/quailb/queries.py) over them. Per model and rule: accuracy, the answers the two
rules share, the fresh tokens the engine computed and the seconds of the statement.

    python -m bench label_scoring [--models smollm2-135m gemma3-270m]
        # writes bench/results/label-scoring-cpu.json|md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path

from bench.results_io import RESULTS, write_result

DATA = Path(__file__).parent / "data" / "organ_classes.jsonl"
RULES = ("teacher-forced (before)", "own first tokens (now)")


def load() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def run(model: str, rows: list[dict], forced: bool) -> dict:
    """BIO-5's query over `rows` in a fresh session (no answer cache) of `model`; `forced`: with
    the rule before (a label set's shared first tokens kept, so the set is teacher-forced)."""
    import pyarrow as pa

    from quail_engine.exec.facade import SessionConfig, connect, load_engine, open_session
    from quail_engine.infer import readout
    from quail_testing.quailb.queries import QUERIES

    owned = readout._owned_firsts
    if forced:
        readout._owned_firsts = lambda firsts, spellings: tuple(firsts)
    try:
        config = SessionConfig(model=model, device="cpu", precision="fp32", use_cache=False)
        engine = load_engine(config)
        con = connect()
        con.register("terms", pa.table({"id": [r["id"] for r in rows],
                                        "term": [r["term"] for r in rows]}))
        session = open_session(con, config, engine_factory=lambda: engine)
        fresh0 = engine.stats.fresh_tokens
        start = time.perf_counter()
        out = session.execute(QUERIES["BIO-5"].sql, "snowflake").to_pylist()
        seconds = time.perf_counter() - start
        single = engine._labels(_organ_classes()).is_single_step
    finally:
        readout._owned_firsts = owned
    got = {r["m"]: r["organ_class"] for r in out}
    return {"answers": [got.get(r["id"]) for r in rows], "seconds": round(seconds, 2),
            "fresh_tokens": engine.stats.fresh_tokens - fresh0, "single_step": single}


def _organ_classes():
    """The label readout BIO-5 asks (its single-step flag is the engine's rule's outcome)."""
    from quail_engine.infer.api import LabelReadout
    from quail_testing.quailb.prompts import BIO_ORGAN_CLASS_LABELS
    return LabelReadout(BIO_ORGAN_CLASS_LABELS)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    ap.add_argument("--out", default=str(RESULTS / "label-scoring-cpu.json"))
    args = ap.parse_args(argv)
    rows = load()
    truth = [r["label"] for r in rows]
    result = {"date": dt.date.today().isoformat(), "n": len(rows), "models": {},
              "command": "python -m bench label_scoring --models " + " ".join(args.models)}
    for model in args.models:
        arms = {rule: run(model, rows, forced=(k == 0)) for k, rule in enumerate(RULES)}
        before, now = (arms[rule]["answers"] for rule in RULES)
        for arm in arms.values():
            arm["accuracy"] = round(sum(a == t for a, t in zip(arm["answers"], truth))
                                    / len(rows), 4)
        result["models"][model] = {
            "arms": arms, "same_answers": sum(a == b for a, b in zip(before, now)),
            "fixed": sum(a != t and b == t for a, b, t in zip(before, now, truth)),
            "broken": sum(a == t and b != t for a, b, t in zip(before, now, truth))}
        print(model, {rule: (arm["accuracy"], arm["fresh_tokens"], arm["seconds"])
                      for rule, arm in arms.items()}, flush=True)
    write_result(result, "label_scoring", markdown, args.out)
    return 0


def markdown(r: dict) -> str:
    lines = [f"# Label sets whose case variants share a first token ({r['date']})", "",
             f"`{r['command']}`: QUAIL-B's BIO-5 query (26 MedDRA organ classes) through a real "
             f"session, CPU, float32, no answer cache, over bench/data/organ_classes.jsonl "
             f"({r['n']} terms with their classes). Chance: 1/26 = 0.038.", "",
             "| model | rule | single-step | accuracy | fresh tokens | seconds |",
             "|---|---|---|---:|---:|---:|"]
    for model, m in r["models"].items():
        for rule, arm in m["arms"].items():
            lines.append(f"| {model} | {rule} | {arm['single_step']} | {arm['accuracy']:.3f} | "
                         f"{arm['fresh_tokens']:,} | {arm['seconds']} |")
    lines.append("")
    for model, m in r["models"].items():
        lines.append(f"- {model}: {m['same_answers']} of {r['n']} answers the same under both "
                     f"rules; {m['fixed']} wrong before and right now, {m['broken']} right "
                     "before and wrong now.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
