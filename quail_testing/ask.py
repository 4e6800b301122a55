"""Engine calls in the product's prompt layouts (quail_engine/infer/prompt_layout.py): the helpers the
accuracy benchmarks and the engine tests ask an engine with. The executor builds its requests
itself (quail_engine/exec/prompts.py); these are for measuring and testing the engine alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from quail_engine.infer.api import (
    Answer,
    BooleanReadout,
    GenerateReadout,
    LabelReadout,
    Request,
    ScoreReadout,
)
from quail_engine.infer.prompt_layout import (
    BOOLEAN_HINT,
    CONTENT_FREE,
    document_text,
    label_hint,
    pair_cue,
    pair_readout,
)


def prompt_split(engine: Any, document: str, question: str,
                 hint: str = BOOLEAN_HINT) -> tuple[list[int], list[int]]:
    """(head: chat header + document, tail: question + answer header) token ids."""
    return engine.chat_split(document_text(document), f"Question: {question}\n{hint}")


def join_split(engine: Any, anchor: str, partner: str,
               question: str) -> tuple[list[int], list[int]]:
    """(head: chat header + anchor text, tail: partner text + question) token ids."""
    return engine.chat_split(f"First text:\n{anchor}\n\nSecond text:\n",
                             f"{partner}\n\nQuestion: {question}\n{BOOLEAN_HINT}")


def _prompt(engine: Any, document: str, question: str, hint: str) -> tuple[int, ...]:
    head, tail = prompt_split(engine, document, question, hint)
    return tuple(head + tail)


def _cal(engine: Any, question: str, hint: str, calibrate: bool) -> tuple[int, ...] | None:
    return _prompt(engine, CONTENT_FREE, question, hint) if calibrate else None


def ask_boolean(engine: Any, documents: Sequence[str], question: str,
                calibrate: bool = True) -> list[Answer]:
    """`question` about each document; Answer.value is a bool, .score P(yes)."""
    readout = BooleanReadout(calibration_tokens=_cal(engine, question, BOOLEAN_HINT, calibrate))
    return engine.run([Request(_prompt(engine, d, question, BOOLEAN_HINT), readout)
                       for d in documents])


def ask_score(engine: Any, documents: Sequence[str], question: str,
              calibrate: bool = True) -> list[Answer]:
    """P(yes) for `question` about each document, as Answer.value (float in [0, 1])."""
    readout = ScoreReadout(calibration_tokens=_cal(engine, question, BOOLEAN_HINT, calibrate))
    return engine.run([Request(_prompt(engine, d, question, BOOLEAN_HINT), readout)
                       for d in documents])


def classify(engine: Any, documents: Sequence[str], labels: Sequence[str],
             task: str = "Which label fits the text?", calibrate: bool = True) -> list[Answer]:
    """One of `labels` per document; Answer.value is the label, .score its probability."""
    labels, hint = tuple(labels), label_hint(labels)
    readout = LabelReadout(labels, calibration_tokens=_cal(engine, task, hint, calibrate))
    return engine.run([Request(_prompt(engine, d, task, hint), readout) for d in documents])


def ask_questions(engine: Any, documents: Sequence[str], questions: Sequence[str],
                  calibrate: bool = True) -> list[list[Answer]]:
    """Several yes/no questions per document: each document's KV is computed once and every
    question runs as a suffix on it. Returns answers[document][question]."""
    readouts = [BooleanReadout(calibration_tokens=_cal(engine, q, BOOLEAN_HINT, calibrate))
                for q in questions]
    out = []
    for d in documents:
        head = prompt_split(engine, d, "")[0]
        tails = [prompt_split(engine, d, q)[1] for q in questions]
        handle = engine.add_prefix(head)
        try:
            out.append(engine.run([Request(tuple(t), ro, handle)
                                   for t, ro in zip(tails, readouts)]))
        finally:
            engine.release(handle)
    return out


def ask_pairs(engine: Any, documents: Sequence[str], partners: Sequence[str],
              stem: str) -> list[list[Answer]]:
    """Does each document go with each partner, read as `stem` + partner (e.g. stem "Does the
    text above talk about", partner "battery life")? Each document's KV is computed once and
    every partner runs as a suffix on it; each partner's content-free reference runs once.
    Returns answers[document][partner]; Answer.margin is the PMI minus PAIR_THRESHOLD."""
    cue = pair_cue(stem)
    readout = pair_readout(cue)
    tails = [tuple(engine.chat_split("", f"{cue} {p}")[1]) for p in partners]
    handles = engine.add_prefixes([engine.chat_split(document_text(d), "")[0] for d in documents])
    try:
        return [engine.run([Request(t, readout, h) for t in tails]) for h in handles]
    finally:
        for h in handles:
            engine.release(h)


def ask_join(engine: Any, anchors: Sequence[str], partners: Sequence[str], question: str,
             calibrate: bool = True) -> list[list[Answer]]:
    """`question` about every (anchor, partner) pair as yes/no: each anchor's KV is computed
    once and every partner runs as a suffix on it. Returns answers[anchor][partner]. On the
    small embedded models this yes/no is at chance (see the module docstring): use ask_pairs."""
    tails = [tuple(join_split(engine, "", p, question)[1]) for p in partners]
    cal = join_split(engine, CONTENT_FREE, CONTENT_FREE, question)
    readout = BooleanReadout(calibration_tokens=tuple(cal[0] + cal[1]) if calibrate else None)
    handles = engine.add_prefixes([join_split(engine, a, "", question)[0] for a in anchors])
    out = []
    try:
        for h in handles:
            out.append(engine.run([Request(t, readout, h) for t in tails]))
    finally:
        for h in handles:
            engine.release(h)
    return out


def generate(engine: Any, prompts: Sequence[str], max_tokens: int = 64,
             stop: Sequence[str] = ()) -> list[str]:
    """Greedy completion of each prompt (one user turn each)."""
    readout = GenerateReadout(max_tokens=max_tokens, stop=tuple(stop))
    requests = []
    for p in prompts:
        head, tail = engine.chat_split(p, "")
        requests.append(Request(tuple(head + tail), readout))
    return [str(a.value) for a in engine.run(requests)]
