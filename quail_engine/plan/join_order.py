"""Join order and anchor choice: System R dynamic programming over left-deep plans.

An AI join is anchored on its document relation (its prompt's first argument: exec/prompts.py),
so that the plan never changes what the model reads; the anchor's document KV is computed once per
distinct anchor row, and each candidate pair then costs only the partner's tokens and the
question. An operator without a fixed document (planner tests' fakes) is costed both ways.
Per set of joined relations we keep every candidate not dominated in (fresh tokens, attention
pairs, KV writes, KV reads) and finally pick the one of least speed-of-light seconds. `start`
lets the executor re-plan the remaining joins from an observed intermediate result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from quail_engine.plan.context import PlanContext
from quail_engine.plan.cost import Work, request_work


@dataclass(frozen=True)
class JoinEdge:
    """An AI join `op` between aliases `a` and `b` (plain equi edges have op None)."""

    op: int | None
    a: str
    b: str


@dataclass(frozen=True)
class JoinStep:
    """Add relation `alias` to the joined set through AI join `op` anchored on `anchor`."""

    alias: str
    op: int | None = None
    anchor: str | None = None
    partner: str | None = None
    rows_in: float = 0.0       # candidate pairs
    rows_out: float = 0.0
    work: Work = Work()

    def text(self) -> str:
        if self.op is None:
            return f"+{self.alias}"
        return f"+{self.alias} ai_join#{self.op}(anchor={self.anchor})"


@dataclass(frozen=True)
class Candidate:
    start: tuple[str, ...]
    steps: tuple[JoinStep, ...]
    rows: float
    work: Work

    def text(self) -> str:
        return " ".join([",".join(self.start), *(s.text() for s in self.steps)])


def dominates(x: Work, y: Work) -> bool:
    a, b = x.as_tuple(), y.as_tuple()
    return all(p <= q for p, q in zip(a, b)) and a != b


def pareto(cands: Sequence[Candidate]) -> list[Candidate]:
    """Candidates no other candidate dominates (first of exact duplicates kept)."""
    out: list[Candidate] = []
    for c in cands:
        if any(dominates(o.work, c.work) or o.work == c.work for o in out):
            continue
        out = [o for o in out if not dominates(c.work, o.work)] + [c]
    return out


def _ai_work(info, anchor: str, partner: str, anchors: float, pairs: float,
             is_resident: bool = False) -> Work:
    stem = 0.0 if is_resident else info.stem_tokens.get(anchor, 0.0)
    d_anchor = info.doc_tokens(anchor) + stem
    own = info.doc_tokens(partner) + info.question_tokens - stem
    encode = Work() if is_resident else request_work(d_anchor, 0, True).scaled(anchors)
    return encode + request_work(d_anchor, own, False).scaled(pairs)


def _extend(cand: Candidate, joined: frozenset[str], alias: str, edges: Sequence[JoinEdge],
            ctx: PlanContext, rows: Mapping[str, float], hints: bool) -> list[Candidate]:
    mine = [e for e in edges if alias in (e.a, e.b) and ({e.a, e.b} - {alias}) <= joined]
    frac = 1.0
    for other in joined:
        frac *= ctx.fraction(alias, other)
    pairs = cand.rows * rows[alias] * frac
    variants: list[tuple[tuple[JoinStep, ...], Work, float]] = [((), Work(), pairs)]
    for e in (e for e in mine if e.op is not None):
        info = ctx.ops[e.op]
        other = e.b if e.a == alias else e.a
        new_variants = []
        for steps, work, n in variants:
            # the prompt reads `other` and `alias` only: each distinct pair runs once (the
            # executor asks distinct values), however many joined rows repeat it (a star)
            asked = min(n, min(cand.rows, rows[other]) * rows[alias] * ctx.fraction(alias, other))
            for anchor, partner in ((alias, other), (other, alias)):
                if hints and info.anchor_hint and anchor != info.anchor_hint:
                    continue
                if info.document is not None and anchor != info.document:
                    continue  # the prompt's document is fixed by the SQL, not by the plan
                anchors = min(asked, rows[anchor] if anchor == alias
                              else min(cand.rows, rows[anchor]))
                w = _ai_work(info, anchor, partner, anchors, asked,
                             (e.op, anchor) in ctx.resident)
                out = n * info.selectivity
                step = JoinStep(alias, e.op, anchor, partner, n, out, w)
                new_variants.append(((*steps, step), work + w, out))
        variants = new_variants
    result = []
    for steps, work, n in variants:
        steps = steps or (JoinStep(alias, None, None, None, pairs, pairs),)
        result.append(Candidate(cand.start, cand.steps + steps, n, cand.work + work))
    return result


def plan_joins(aliases: Sequence[str], edges: Sequence[JoinEdge], ctx: PlanContext,
               rows: Mapping[str, float] | None = None,
               start: tuple[frozenset[str], float] | None = None,
               hints: bool = True) -> list[Candidate]:
    """Non-dominated left-deep candidates joining all `aliases`, best (least seconds) first.

    `rows`: rows per alias (defaults to ctx.rows); `start`: an already joined set and its
    observed row count (re-planning); `hints`: honour anchor hints.
    """
    rows = dict(rows or ctx.rows)
    all_aliases = frozenset(aliases)
    best: dict[frozenset[str], list[Candidate]] = {}
    if start is None:
        for a in aliases:
            best[frozenset((a,))] = [Candidate((a,), (), float(rows[a]), Work())]
        first_size = 1
    else:
        joined, observed = start
        best[frozenset(joined)] = [Candidate(tuple(sorted(joined)), (), float(observed), Work())]
        first_size = len(joined)
    for size in range(first_size, len(all_aliases)):
        for subset in [s for s in best if len(s) == size]:
            remaining = sorted(all_aliases - subset)
            connected = [a for a in remaining
                         if any(a in (e.a, e.b) and ({e.a, e.b} - {a}) <= subset for e in edges)]
            for alias in connected or remaining:  # no cross product while a join is possible
                new = frozenset(subset | {alias})
                grown = [c2 for c in best[subset]
                         for c2 in _extend(c, subset, alias, edges, ctx, rows, hints)]
                if grown:
                    best[new] = pareto([*best.get(new, []), *grown])
    return sorted(best.get(all_aliases, []), key=lambda c: ctx.seconds(c.work))
