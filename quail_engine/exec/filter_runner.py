"""Run a core's AI filters in the planned order, and the KV they carry into the first join.

Per relation in the plan's filter order, its rows in chunks within the plan's bounds (documents
resident across the predicates that share them), each chunk through the filter steps in order.
Where the plan names a carry, the survivors' documents stay resident for the first join (within
the plan's share of the KV arena: past it the joins are asked early, as the plan's `carry.early`
says); the documents the filters drop are asked the later joins the plan lets ride over them,
then released.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.doc_kv import kv_capacity_tokens, kv_page_tokens
from quail_engine.exec.estimates import doc_texts
from quail_engine.exec.join_runner import expand
from quail_engine.exec.joined import ROW, Joined
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.prompts import OpPrompt
from quail_engine.exec.rides import Ride, ask_dropped, observe_rides
from quail_engine.exec.scans import ScanData, op_values
from quail_engine.plan.chunking import Chunking
from quail_engine.plan.filter_chunks import FLUSH_END, FLUSH_OUTGROWN, FilterRun
from quail_engine.plan.physical import PhysicalPlan
from quail_engine.plan.sharing import common_prefix_len
from quail_engine.plan.strategy import EARLY_LEADING, EARLY_STAR


class FilterRunner:
    """Interprets the plan's filter runs (plan/filter_chunks.py). `carry` holds the documents
    the filters keep for the first join until the core's joins release it; `carry_flushes` /
    `carry_dropped` count the early asks and the documents left to the join to encode again."""

    def __init__(self, ai_ops: Sequence, runner: OpRunner, store: AnswerStore):
        self.ai_ops, self.runner, self.store = ai_ops, runner, store
        self._row_tokens: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
        self.carry = runner.doc_kv()
        self.carry_dropped = self.carry_flushes = 0
        self.carry_rows: list[int] = []  # the scan rows whose documents the carry holds

    def run(self, plan: PhysicalPlan, scans: dict[str, ScanData]) -> dict[str, list[int]]:
        """The surviving scan rows per relation, each relation's filters (and its projections
        too, where the plan runs them with the filters' chunks) run in chunks of its rows,
        stopped where the plan's LIMIT says once that many rows pass."""
        limit = plan.limit if plan.limit is not None and plan.limit.stops_filters else None
        survivors: dict[str, list[int]] = {}
        carry_alias = plan.carry.alias if plan.carry is not None else None
        flushes = plan.carry.flushes if plan.carry is not None else ()
        for run in plan.filter_runs:
            alias = run.alias
            scan = scans[alias]
            steps = [plan.steps[n] for n in run.steps]
            alive_all: list[int] = []
            rides = self._dropped_rides(plan, scans, survivors) if alias == carry_alias else []
            c = 0
            while c < len(scan.rows):
                chunk = self._chunk_rows(run, plan.chunking, scan, c)
                if limit is not None:
                    if len(alive_all) >= limit.rows:
                        break  # enough rows pass: the LIMIT keeps no other
                    chunk = plan.chunking.limit_chunk(chunk, limit.rows - len(alive_all))
                alive = list(range(c, min(c + chunk, len(scan.rows))))
                c += chunk
                kvs: dict[str, object] = {}
                try:
                    for step in steps:
                        alive = self._run_step(step, scan, alive, kvs)
                        for key in step.release:
                            kv = kvs.pop(key, None)
                            if kv is not None:
                                kv.release()
                    kv = kvs.pop(plan.carry.doc, None) if alias == carry_alias and steps \
                        else None
                    if kv is not None:
                        self._carry_chunk(plan, scans, survivors, steps[-1].op, alive, kv)
                        self._ride_dropped(plan, rides, kv)
                        kv.release()  # documents of rows the filters eliminated
                finally:
                    for kv in kvs.values():
                        kv.release()
                alive_all += alive
            if alias == carry_alias and FLUSH_END in flushes:
                self._flush_carry(plan, scans, survivors)
            survivors[alias] = alive_all
            # every row that can reach these filters was asked: a miss later is a dead row
            self.store.complete |= {s.op for s in steps if s.kind == "filter"}
        return survivors

    def _carry_chunk(self, plan: PhysicalPlan, scans: dict[str, ScanData],
                     survivors: dict[str, list[int]], last_op: int, alive: list[int],
                     kv) -> None:
        """The documents of a filter chunk's survivors `alive` (resident in `kv`, read by the
        filter `last_op`) taken into the carry, within its share of the arena (asking the joins
        early to make room, where the plan says how)."""
        scan = scans[plan.carry.alias]
        last = self.ai_ops[last_op]
        layout = self.runner.layout(last)
        text_of = {i: layout.texts(op_values(scan, last_op, last, i))[0] for i in alive}
        texts = list(dict.fromkeys(text_of.values()))  # in row order
        keep = self._carry_fits(plan.chunking, kv, texts)
        if len(keep) < len(texts) and FLUSH_OUTGROWN in plan.carry.flushes and \
                self._flush_carry(plan, scans, survivors):
            keep = self._carry_fits(plan.chunking, kv, texts)
        self.carry_dropped += len(texts) - len(keep)
        self.carry.take(kv, keep)
        kept = set(keep)
        self.carry_rows += [i for i in alive if text_of[i] in kept]

    def _chunk_rows(self, run: FilterRun, chunking: Chunking, scan: ScanData,
                    start: int) -> int:
        """Rows of the chunk from row `start`, as the plan's `run` sizes it from what is observed
        here: whether the engine (its arena) is loaded, the arena's size, and where the run
        counts rows past their shared beginnings, each row's own tokens (estimated from its
        text once per relation and step)."""
        if not run.is_resident:
            return run.rows(chunking, len(scan.rows))
        engine = self.runner.loaded_engine()
        if engine is None:  # not loaded yet (nor needed, if every answer is cached)
            return run.rows(chunking, len(scan.rows), is_arena_known=False)
        capacity = kv_capacity_tokens(engine)
        if capacity is None or not run.counts_own_tokens:
            return run.rows(chunking, len(scan.rows), capacity=capacity)
        key = (run.alias, run.sized_by)
        if key not in self._row_tokens:
            self._row_tokens[key] = own_tokens(
                doc_texts(scan, run.sized_by, self.ai_ops[run.sized_by]), run.doc_tokens,
                kv_page_tokens(engine))
        full, own = self._row_tokens[key]
        # the chunk's first document counted whole
        return run.rows(chunking, len(scan.rows), capacity=capacity, tokens=own[start:],
                        first=float(full[start] - own[start]))

    def _dropped_rides(self, plan: PhysicalPlan, scans: dict[str, ScanData],
                       survivors: dict[str, list[int]]) -> list[Ride]:
        """The Ride of each join of the plan's `dropped_rides` over the first join's anchors
        (the other relations filter before the carried one: their survivors are known)."""
        if not plan.dropped_rides:
            return []
        cand = plan.candidates[0]
        cur = Joined({a: np.array(survivors.get(a, []), dtype=ROW) for a in cand.start})
        return observe_rides(plan.dropped_rides, cur, scans, survivors, self.ai_ops,
                             self.runner)

    def _ride_dropped(self, plan: PhysicalPlan, rides: list[Ride], kv) -> None:
        """`rides` over the documents `kv` still holds once the carry took its survivors, as
        the plan decides from the rows the first join kept of the pairs the carry's flushes
        asked (before any, from its estimate, which has weighed the join's sampled answers)."""
        if not rides or not len(kv):
            return
        first = plan.candidates[0].steps[0]
        op = self.ai_ops[first.op]
        asked = self.store.count(first.op) if self.carry_flushes else 0
        passed = sum(1 for _, a in self.store.answers(first.op) if op.passes(a)) if asked else 0
        ask_dropped(rides, asked, passed, kv, list(kv.handles), self.runner, self.store)

    def _carry_fits(self, chunking: Chunking, kv, texts) -> list[str]:
        """The documents of `texts` (resident in `kv`) the join may find still resident: within
        the plan's carry share of the KV arena, in the order given. The others are released
        with the filters' chunk (after `_flush_carry` made room, when it can) and encoded
        again by the join (every filtered document kept for the join can fill the arena)."""
        handles = [kv.handles.get(text) for text in texts]
        keep = chunking.carry_keep(kv_capacity_tokens(self.runner.engine),
                                   self.carry.resident_tokens(),
                                   [h.num_tokens if h is not None else 0 for h in handles])
        return [text for text, kept in zip(texts, keep) if kept]

    def _flush_carry(self, plan: PhysicalPlan, scans: dict[str, ScanData],
                     survivors: dict[str, list[int]]) -> bool:
        """When the carried documents fill their share of the arena: ask the core's AI joins
        for the pairs of the rows carried so far while their KV is resident, then let it go
        (the answers wait in the store; the joins later ask only the other pairs), as the
        plan's `carry.early` says (plan/strategy.py): every surviving pair of a core's one AI
        join; a star's joins in the plan's order over the carried rows, each reading their
        documents in turn; or a longer plan's first join. The carried relation filters last,
        so its partners' survivors are known. Returns whether it flushed."""
        carry = plan.carry
        if carry is None or carry.early is None or not self.carry_rows:
            return False
        cand = plan.candidates[0]
        partners = [a for a in plan.relations if a != carry.alias]
        rows_of = {partner: survivors[partner] for partner in partners}
        rows = np.array(self.carry_rows, dtype=ROW)
        if carry.early == EARLY_LEADING:  # (the later joins that read these documents as
            first = cand.steps[0]         # another alias ride along, as the plan's first turn)
            cur = Joined({carry.alias: rows})
            rides = observe_rides(plan.joins.turns[0].rides, cur, scans, survivors,
                                  self.ai_ops, self.runner)
            expand(first, cur, first.alias, scans, rows_of[first.alias], self.ai_ops,
                   self.runner, self.store, self.carry, plan.chunking, materialize=False,
                   count=False, chunk_kv=plan.joins.turns[0].kv, rides=rides)
        elif carry.early == EARLY_STAR:
            cur = Joined({carry.alias: rows})
            for n, step in enumerate(cand.steps):
                cur = expand(step, cur, step.alias, scans, rows_of[step.alias], self.ai_ops,
                             self.runner, self.store, self.carry,
                             materialize=n + 1 < len(cand.steps), count=False,
                             chunk_kv=plan.joins.star_kv, chunking=plan.chunking)
        else:
            (partner,) = partners
            step = cand.steps[0]
            if cand.start[0] == carry.alias:
                cur, new, new_rows = Joined({carry.alias: rows}), partner, rows_of[partner]
            else:
                cur = Joined({partner: np.array(rows_of[partner], dtype=ROW)})
                new, new_rows = carry.alias, self.carry_rows
            expand(step, cur, new, scans, new_rows, self.ai_ops, self.runner, self.store,
                   self.carry, materialize=False, count=False, chunking=plan.chunking,
                   chunk_kv=plan.joins.turns[-1].kv, project=plan.joins.turns[-1].projections)
        self.carry.release()
        self.carry_rows = []
        self.carry_flushes += 1
        return True

    def _ask(self, op: int, layout: OpPrompt, values: list[tuple], kv) -> None:
        self.store.fill(op, values, lambda need: self.runner.answer(op, layout, need, kv=kv))

    def _run_step(self, step, scan: ScanData, alive: list[int], kvs: dict) -> list[int]:
        op = self.ai_ops[step.op]
        layout = self.runner.layout(op)
        rep = self.runner.report.op(step.op, op.op)
        values = [op_values(scan, step.op, op, i) for i in alive]
        kv = None
        if layout.is_shared and not step.is_read_once:
            kv = kvs.setdefault(step.doc, self.runner.doc_kv())
        if step.kind == "project":
            self.runner.project(step.op, layout, values, self.store, kv)
            return alive
        self._ask(step.op, layout, values, kv)
        rep.rows_in += len(alive)
        kept = [i for i, v in zip(alive, values) if op.passes(self.store.get(step.op, v))]
        rep.rows_out += len(kept)
        return kept


def own_tokens(texts: Sequence[str], mean_tokens: float, page: int = 0
               ) -> tuple[np.ndarray, np.ndarray]:
    """(tokens of each text, tokens past its common beginning with the text before it, plus
    the `page` of the shared part's last partial page it copies), estimated from characters
    at the texts' mean tokens a character."""
    lengths = np.array([len(t) for t in texts], dtype=np.float64)
    if not lengths.any():  # no text to measure: every row at the mean
        full = np.full(len(texts), float(mean_tokens))
        return full, full.copy()
    per_char = mean_tokens / float(lengths.mean())
    common = np.zeros(len(texts))
    for i in range(1, len(texts)):
        common[i] = common_prefix_len(texts[i - 1], texts[i])
    full = lengths * per_char
    own = np.where(common > 0, np.minimum(full, (lengths - common) * per_char + page), full)
    return full, own
