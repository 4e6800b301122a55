"""Operators whose value per row is put together from several requests: AI_SENTIMENT over
aspects (one question per aspect), a multi-label classification (one yes/no decision per
label) and AI_SIMILARITY (both directions). Each asks its requests through the runner's
OpRunner.answer, so they are cached, batched and reported like any operator's, and puts each
row's value together from its requests' answers.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from quail_engine.exec.doc_kv import DocKV
from quail_engine.exec.prompts import OpPrompt
from quail_engine.exec.sql_values import similarity_value
from quail_engine.infer.api import Answer


def answer_aspects(runner, op_id: int, layout: OpPrompt, rows: Sequence[Sequence[object]],
                   kv: DocKV | None, unplanned: bool, aspects: list[str]) -> list[object]:
    """Snowflake's AI_SENTIMENT(text, categories): the overall sentiment and each aspect's,
    each asked as its own question after the same document (its KV computed once and
    shared), as {"categories": [{"name": "overall", "sentiment": ...}, {"name": aspect,
    ...}, ...]}; NULL where the input is. `runner`: the OpRunner asking."""
    base = dataclasses.replace(layout.op, output_type=None, task_args=tuple(
        (k, v) for k, v in layout.op.task_args if k != "aspects"))
    asks = [("overall", base)] + [
        (a, dataclasses.replace(base, instruction=f"Consider only what the text says about "
                                                  f"{a}; if it says nothing about it, the "
                                                  "answer is unknown."))
        for a in aspects]
    answers = [runner.answer(op_id, dataclasses.replace(layout, op=op), rows, kv=kv,
                             unplanned=unplanned) for _, op in asks]
    out: list[object] = []
    for k in range(len(rows)):
        got = [a[k] for a in answers]
        out.append(None if None in got else json.dumps({"categories": [
            {"name": name, "sentiment": value} for (name, _), value in zip(asks, got)]}))
    return out


def answer_labels(runner, op_id: int, layout: OpPrompt, rows: Sequence[Sequence[object]],
                  kv: DocKV | None, unplanned: bool) -> list[object]:
    """A multi-label op's values: each row asked once per label in one call
    (`layout.decisions()`: the document is the prefix, so its KV is computed once and each
    label's decision, cached by itself, is a short suffix on it); a row's value is the
    labels decided yes, in the op's order (none: an empty list), NULL where its input is."""
    names = [lb.name for lb in layout.op.labels or ()]
    asked = [(*values, name) for values in rows for name in names]
    decided = runner.answer(op_id, layout.decisions(), asked, kv=kv, unplanned=unplanned)
    out: list[object] = []
    for k in range(len(rows)):
        row = decided[k * len(names):(k + 1) * len(names)]
        out.append(None if None in row else [n for n, yes in zip(names, row) if yes])
    return out


def answer_similarity(runner, op_id: int, layout: OpPrompt, rows: Sequence[Sequence[object]],
                      kv: DocKV | None, unplanned: bool, ahead) -> list[object]:
    """A similarity's values: each row asked in both directions in one call
    (`layout.directions()`: the second text after the first, and the first after the
    second, each direction's PMI cached by itself), its value the mean of the two through
    the curve (similarity_value), so exchanging the arguments gives the same number. Rows
    whose mean is a close call at a number the SQL compares it with are asked again, both
    directions, at the reference precision (_reask_close). The values are cached too, by
    the whole readout (the SQL's numbers included), so a query answered before needs
    neither the model nor its band."""
    prep = runner.prepare(layout, rows)
    rep = runner.report.op(op_id, layout.op.op)
    rep.nulls += prep.nulls
    rep.cache_hits += len(prep.cached)
    out = [prep.cached.get(prep.keys.get(i)) for i in range(len(rows))]
    need = [rows[i] for i in prep.todo]
    asked = [*need, *(layout.swapped(values) for values in need)]
    pmis = runner.answer(op_id, layout.directions(), asked, kv=kv, unplanned=unplanned,
                         ahead=ahead)
    _reask_close(runner, op_id, layout, asked, pmis)
    values = {}
    for k, i in enumerate(prep.todo):
        out[i] = similarity_value(layout.op, (pmis[k] + pmis[len(need) + k]) / 2)
        values[prep.keys[i]] = out[i]
    runner.cache.put_many(values)
    return out


def _reask_close(runner, op_id: int, layout: OpPrompt, asked: list, pmis: list) -> None:
    """The re-ask band on a similarity's mean: a row whose two directions' mean margin the
    band holds at one of the SQL's numbers (the margin the whole readout would have) has
    both directions answered again by the reference precision, in `pmis` and the cache.
    Each direction alone can be far from the number while their mean is near it, so the
    engine's own band, which sees one request at a time, is not asked per direction."""
    readout = layout.readout()
    if not readout.thresholds or not asked or (
            runner.loaded_engine() is None and not runner.precision.endswith("-band")):
        return  # (every direction was cached, and no band could send one back: not loaded)
    band = getattr(runner.engine, "band", None)  # a ReaskingEngine's (infer/reask.py)
    n = len(asked) // 2
    close = [] if band is None else [
        k for k in range(n)
        if band.holds(readout, Answer(0.0, margin=(pmis[k] + pmis[n + k]) / 2))]
    if not close:
        return
    again = close + [n + k for k in close]
    values = runner.answer_reference(op_id, layout.directions(), [asked[i] for i in again])
    for i, value in zip(again, values):
        pmis[i] = value
