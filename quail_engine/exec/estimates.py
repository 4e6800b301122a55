"""Planner inputs measured on the data: prompt token lengths and selectivities.

A selectivity hint (Options.selectivity) wins; otherwise the predicates the planner names
(plan/sampling.sample_steps: where a sample can change the plan) run on a small evenly spaced
sample first (their answers are stored, so they are not computed again) and the planner uses the
observed rate.
"""

from __future__ import annotations

from collections.abc import Sequence

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.scans import ScanData, op_values
from quail_engine.plan.build import doc_key
from quail_engine.plan.context import OpInfo
from quail_engine.plan.sampling import SAMPLE_ROWS, SampleCandidate, SampleStep
from quail_engine.plan.selectivity import estimate
from quail_engine.plan.sharing import shared_prefix_fraction
from quail_engine.settings import prefix_sharing_enabled
from quail_engine.sql.ir import OpKind, binding_column
from quail_engine.sql.op_kinds import spec

TOKEN_SAMPLE = 16


def binding_alias(op_id: int, index: int, scans: dict[str, ScanData]) -> str:
    for alias, scan in scans.items():
        if binding_column(op_id, index) in scan.columns:
            return alias
    raise KeyError(binding_column(op_id, index))


def doc_texts(scan: ScanData, op_id: int, op, rows: Sequence[int] | None = None) -> list[str]:
    """Per row of `scan` (or of `rows`), the text of `op`'s document there: its bindings the
    scan holds, joined (a binding's relation is the scan holding its column)."""
    cols = [binding_column(op_id, i) for i in range(len(op.bindings))
            if binding_column(op_id, i) in scan.columns]
    picked = scan.rows if rows is None else [scan.rows[r] for r in rows]
    return ["\n\n".join(str(row.get(c) or "") for c in cols) for row in picked]


def spread(n: int, k: int) -> list[int]:
    """Up to k evenly spaced indexes of range(n)."""
    if n <= k:
        return list(range(n))
    return [round(i * (n - 1) / (k - 1)) for i in range(k)] if k > 1 else [0]


def _token_lengths(op_id: int, op, scans, runner: OpRunner,
                   shared: dict[str, float] | None = None) -> tuple[dict[str, float], float]:
    """Mean tokens per alias and of the question; `shared` gets each alias's share of tokens
    that begin like another row's (when prefix sharing is on)."""
    tokens: dict[str, float] = {}
    for alias in dict.fromkeys(binding_alias(op_id, i, scans) for i in range(len(op.bindings))):
        scan = scans[alias]
        texts = doc_texts(scan, op_id, op, spread(len(scan.rows), TOKEN_SAMPLE))
        lengths = [len(t) for t in runner.text.tokenize(texts)] if texts else [0]
        tokens[alias] = sum(lengths) / max(1, len(lengths))
        if shared is not None and prefix_sharing_enabled():
            shared[alias] = shared_prefix_fraction(doc_texts(scan, op_id, op),
                                                   spread(len(scan.rows), 4 * TOKEN_SAMPLE))
    layout = runner.layout(op)
    head, tail = runner.text.split(*layout.texts(layout.calibration_values()))
    question = float(len(tail) + len(head) - 1)  # chat framing + template, "N/A" ~ 1 token
    return tokens, question


def _document_alias(op_id: int, op, scans, runner: OpRunner) -> str | None:
    """The relation whose values an AI join's prompt reads as its document (exec/prompts.py
    OpPrompt.for_op); None for other operators."""
    if op.op != OpKind.AI_JOIN:
        return None
    slots = runner.layout(op).doc_slots
    return binding_alias(op_id, slots[0], scans) if slots else None


def _stem_tokens(op_id: int, op, scans, runner: OpRunner) -> dict[str, float]:
    """For the document alias of a two-relation operator: the tokens its pairs' questions
    share at their start (OpRunner moves them into the document's prefix), read off two
    partner rows."""
    aliases = {binding_alias(op_id, i, scans) for i in range(len(op.bindings))}
    out: dict[str, float] = {}
    layout = runner.layout(op)
    if len(aliases) != 2 or layout.partner_slots or not layout.doc_slots:
        return out  # a pair layout keeps its question whole (OpRunner._share_stem)
    for anchor in {binding_alias(op_id, i, scans) for i in layout.doc_slots}:
        partner = next(a for a in aliases if a != anchor)
        rows = spread(len(scans[partner].rows), 2)
        if len(rows) < 2:
            continue
        suffixes = []
        for r in rows:
            values = [scans[partner].rows[r].get(binding_column(op_id, i), "") for i in
                      range(len(op.bindings))]
            suffixes.append(layout.texts(["" if v is None else v for v in values])[1])
        a, b = runner.text.tails(suffixes)
        n = next((i for i in range(min(len(a), len(b)) - 1) if a[i] != b[i]),
                 min(len(a), len(b)) - 1)
        out[anchor] = float(max(0, n))
    return out


def _sample_filter(op_id: int, op, scan: ScanData, runner: OpRunner, store: AnswerStore,
                   k: int) -> tuple[int, int]:
    values = [op_values(scan, op_id, op, r) for r in spread(len(scan.rows), k)]
    store.fill(op_id, values, lambda need: runner.answer(op_id, runner.layout(op), need))
    answers = [store.get(op_id, v) for v in values]
    known = [a for a in answers if a is not None]
    return sum(1 for a in known if op.passes(a)), len(known)


def _sample_join(op_id: int, op, scans, runner: OpRunner, store: AnswerStore,
                 k: int) -> tuple[int, int]:
    aliases = sorted({binding_alias(op_id, i, scans) for i in range(len(op.bindings))})
    if len(aliases) != 2:
        return 0, 0
    a, b = (scans[x] for x in aliases)
    keys = sorted(a.key_columns & b.key_columns)
    pairs = []
    for i in spread(len(a.rows), k):
        for j in spread(len(b.rows), k):
            if not keys or a.key(i, keys) == b.key(j, keys):
                pairs.append((i, j))
    pairs = [pairs[p] for p in spread(len(pairs), k)]
    values = []
    for i, j in pairs:
        row = {**b.rows[j], **a.rows[i]}
        values.append(tuple(row[binding_column(op_id, n)] for n in range(len(op.bindings))))
    store.fill(op_id, values, lambda need: runner.answer(op_id, runner.layout(op), need))
    known = [store.get(op_id, v) for v in values]
    known = [x for x in known if x is not None]
    return sum(1 for x in known if op.passes(x)), len(known)


def op_aliases(op_id: int, op, scans: dict[str, ScanData]) -> tuple[str, ...]:
    """The relations `op`'s bindings read, in binding order."""
    return tuple(dict.fromkeys(binding_alias(op_id, i, scans) for i in range(len(op.bindings))))


def sample_candidates(ops: Sequence[int], ai_ops: Sequence, scans: dict[str, ScanData]
                      ) -> list[SampleCandidate]:
    """What plan/sampling.sample_steps decides the samples from, per operator of `ops`."""
    return [SampleCandidate(o, ai_ops[o].op, ai_ops[o].options.selectivity is not None,
                            op_aliases(o, ai_ops[o], scans)) for o in ops]


def op_infos(ops: Sequence[int], ai_ops: Sequence, scans: dict[str, ScanData], runner: OpRunner,
             store: AnswerStore, samples: Sequence[SampleStep] = ()) -> dict[int, OpInfo]:
    """Each operator's planner inputs; `samples`: the predicates the plan samples first
    (plan/sampling.py), asked here."""
    out: dict[int, OpInfo] = {}
    sample_of = {s.op: s for s in samples}
    for op_id in ops:
        op = ai_ops[op_id]
        shared: dict[str, float] = {}
        reader = _aggregate_writer(op, runner)
        tokens, question = _token_lengths(op_id, op, scans, reader, shared)
        aliases = tuple(tokens)
        hits, n = 0, 0
        sample = sample_of.get(op_id)
        if sample is not None:
            if runner.progress is not None:
                runner.progress.stage(f"sampling {sample.rows} rows to estimate the "
                                      f"selectivity of {op.op} #{op_id}")
            if sample.over == SAMPLE_ROWS:
                hits, n = _sample_filter(op_id, op, scans[aliases[0]], runner, store,
                                         sample.rows)
            else:
                hits, n = _sample_join(op_id, op, scans, runner, store, sample.rows)
        hint = op.options.selectivity  # the call's; under NOT its complement passes
        if hint is not None and op.negated:
            hint = 1.0 - hint
        sel, source = estimate(hint, hits, n)
        doc = doc_key(op, aliases[0]) if len(aliases) == 1 else ""
        document = _document_alias(op_id, op, scans, runner)
        out[op_id] = OpInfo(op_id, op.op, aliases, doc=doc, tokens=tokens,
                            question_tokens=question, selectivity=sel, shared=shared,
                            stem_tokens=_stem_tokens(op_id, op, scans, runner)
                            if len(aliases) == 2 else {},
                            selectivity_source=source, anchor_hint=op.options.anchor,
                            document=document,
                            as_written=op.options.order == "as_written",
                            shares_document=runner.layout(op).is_shared,
                            answer_tokens=_aggregate_answer_tokens(op, reader))
    return out


def _aggregate_writer(op, runner):
    """The runner whose model reads and writes an aggregate's prompts (OpRunner.writer_of): its
    tokenizer counts the texts its map chunks hold, and no other model's tokenizer is loaded
    for them; `runner` for other operators (and a test's runner without writer_of)."""
    if spec(op.op).is_aggregate and hasattr(runner, "writer_of"):
        return runner.writer_of(op)
    return runner


def _aggregate_answer_tokens(op, runner) -> float:
    """The tokens an aggregate's answer may take within the session's cap (`runner`: its
    writer's), which its map chunk's size depends on; 0 for other operators and for a runner
    that measures none (a test's)."""
    if not spec(op.op).is_aggregate or not hasattr(runner, "answer_tokens"):
        return 0.0
    return float(runner.answer_tokens(runner.layout(op).readout()))
