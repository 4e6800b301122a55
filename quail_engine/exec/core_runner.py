"""Precompute the answers of one core in the planned order.

Scans each relation on DuckDB, estimates tokens and selectivities (hints win, else a small
sample of the predicates plan/sampling.py names, whose answers are kept), plans, then follows
the plan: the AI filters per relation in its
filter order, in chunks within its bounds with the document KV resident across the predicates
that share it, the AI joins in the chosen order (re-planned where the plan says) with anchor
documents resident while their partners run, and the AI projections where the plan puts them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quail_engine.exec import keyed_answers
from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.estimates import op_infos, sample_candidates
from quail_engine.exec.filter_runner import FilterRunner
from quail_engine.exec.join_runner import ask_star_in_chunks, run_joins
from quail_engine.exec.join_values import bound_aliases, tuple_values
from quail_engine.exec.joined import Joined
from quail_engine.exec.op_runner import OpRunner
from quail_engine.exec.prompts import is_decoded
from quail_engine.exec.scans import ScanData, load_scan, op_values
from quail_engine.plan.context import PlanContext
from quail_engine.plan.physical import PhysicalPlan
from quail_engine.plan.planner import plan_core
from quail_engine.plan.row_limit import PROJECT_AFTER_JOINS, PROJECT_LIMITED
from quail_engine.plan.sampling import sample_steps
from quail_engine.sql.ir import PREDICATE_KINDS, binding_column
from quail_engine.sql.op_kinds import spec

log = logging.getLogger(__name__)


class CoreRunner:
    """`specs`: gives (ModelSpec, DeviceSpec) for the cost model, called only when the core
    has AI work to plan (resolving the model reads its config; a core over empty relations
    needs neither it nor the model). `use_cache`: the session's answer cache is on (the plan
    says whether calls take its answers)."""

    def __init__(self, con, ai_ops: Sequence, runner: OpRunner, store: AnswerStore, specs,
                 sample_size: int = 8, prepare=None, use_cache: bool = True, writer=None):
        self.con, self.ai_ops, self.runner, self.store = con, list(ai_ops), runner, store
        self.use_cache = use_cache
        self.prepare = prepare  # scans that call AI functions: to this statement's names
        self.specs, self.sample_size = specs, sample_size
        self.writer = writer  # () -> the generation model's ModelSpec, None: the session's writes
        self.model = self.device = None

    def run(self, core, limit=None, num_cores: int = 1) -> PhysicalPlan:
        """`limit` (plan/row_limit.RowLimit): the LIMIT of the statement of `num_cores` cores,
        pushed below its AI calls; the plan says whether it binds this core's filters and where
        the projections run (plan/row_limit.py)."""
        phase = self.runner.report.phase
        with phase("scan"):
            scans = {rel.alias: load_scan(self.con, rel, self.prepare) for rel in core.relations}
        ops = [o for o in (*core.filters, *core.joins, *core.projections,
                           *getattr(core, "aggregates", ()))
               if _precomputable(o, self.ai_ops[o], scans)]
        if ops:
            self.model, self.device = self.specs()
        with phase("estimate"):
            samples = sample_steps(sample_candidates(ops, self.ai_ops, scans),
                                   {a: len(s.rows) for a, s in scans.items()}, self.sample_size)
            infos = op_infos(ops, self.ai_ops, scans, self.runner, self.store, samples)
        with phase("plan"):
            rows = {a: float(len(s.rows)) for a, s in scans.items()}
            ctx = PlanContext(infos, rows, self.model, self.device,
                              pair_fraction=pair_fractions(scans), columns={
                                  a: s.columns for a, s in scans.items()},
                              writer=self._writer(ops))
            planned = planned_core(core, set(ops))
            plan = plan_core(planned, self.ai_ops, ctx, limit, num_cores, samples,
                             self.use_cache)
            self.runner.report.remarks.extend(plan.hint_remarks)
        self._record_estimates(plan, infos)
        self.runner.call_order = plan.call_order
        chunks = {s.op: s.map_chunk for s in plan.steps if s.kind == "aggregate"}
        for runner in (self.runner, self.runner.decoder):  # (the generation model's calls too)
            if runner is not None:
                runner.cached_answers = plan.cached_answers
                runner.map_chunks.update(chunks)  # (DuckDB calls the aggregates later)
        if self.device is not None:  # (a plan costed on no device sizes no batch of its own)
            self.runner.sizer.batching = plan.batching
        has_joins = plan.has_joins
        filters = FilterRunner(self.ai_ops, self.runner, self.store)
        try:
            with phase("filters"):
                survivors = filters.run(plan, scans)
            if plan.projections_at == PROJECT_LIMITED:
                (alias, alive), = survivors.items()
                with phase("projections"):
                    self._run_projections(plan, scans, Joined(
                        {alias: np.array(alive[:plan.limit.rows], dtype=np.int64)}))
            if has_joins:
                with phase("joins"):
                    ask_star_in_chunks(plan, scans, survivors, self.ai_ops, self.runner,
                                       self.store)
                    final = run_joins(plan, scans, survivors, self.ai_ops, self.runner,
                                      self.store, filters.carry,
                                      rows_needed=plan.reads_joined_rows)
        finally:
            filters.carry.release()
        share = plan.chunking.carry_share
        if filters.carry_flushes:
            self.runner.report.remarks.append(
                f"the join was asked {filters.carry_flushes} times during the filters, for the "
                f"documents they had kept resident (more than {share:.0%} of the KV "
                "arena at once)")
        if filters.carry_dropped:
            self.runner.report.remarks.append(
                f"{filters.carry_dropped} documents the filters computed were encoded again by the "
                f"join: keeping them resident would take more than {share:.0%} of the KV "
                "arena")
        if plan.projections_at == PROJECT_AFTER_JOINS:
            with phase("projections"):
                self._run_projections(plan, scans, final)
        with phase("answer_keys"):
            self._key_answers(ops, scans)
        self.runner.report.plans.append(plan.logical.text() + "\n" + plan.text())
        self.runner.report.remarks.extend(plan.remarks)
        return plan

    def _writer(self, ops: list[int]):
        """The generation model's ModelSpec when it writes an aggregate of `ops`, else None."""
        if self.writer is None or self.runner.decoder is None or not any(
                spec(self.ai_ops[o].op).is_aggregate and is_decoded(self.ai_ops[o]) for o in ops):
            return None
        return self.writer()

    def _key_answers(self, ops: list[int], scans: dict[str, ScanData]) -> None:
        """Hash -> value maps of the complete filters and joins, so the final statement can
        look their answers up without copying the texts (exec/keyed_answers.py)."""
        for op_id in ops:
            op = self.ai_ops[op_id]
            if op.op not in PREDICATE_KINDS or op_id not in self.store.complete:
                continue
            if op_id in self.store.keyed:
                self.store.keyed[op_id] = None
                continue
            columns = []
            for i in range(len(op.bindings)):
                col = binding_column(op_id, i)
                scan = next(s for s in scans.values() if col in s.columns)
                columns.append([r[col] for r in scan.rows])
            self.store.keyed[op_id] = keyed_answers.slot_maps(self.con, columns)

    def _record_estimates(self, plan: PhysicalPlan, infos) -> None:
        for step in plan.steps:
            if step.op is None:
                continue
            rep = self.runner.report.op(step.op, self.ai_ops[step.op].op)
            info = infos[step.op]
            rep.est_rows_out = (rep.est_rows_out or 0.0) + step.rows_out
            rep.est_tokens = (rep.est_tokens or 0.0) + step.work.fresh_tokens
            rep.est_seconds = (rep.est_seconds or 0.0) + step.est_seconds
            chooses = step.kind in ("filter", "join")  # (a row kept or not: a selectivity)
            rep.selectivity_est = info.selectivity if chooses else None
            rep.selectivity_source = info.selectivity_source if chooses else None

    def _run_projections(self, plan: PhysicalPlan, scans, final: Joined) -> None:
        for step in (s for s in plan.steps if s.kind == "project"):
            op = self.ai_ops[step.op]
            if step.alias:
                rows = (np.unique(final.cols[step.alias]).tolist() if step.alias in final.cols
                        else [])
                values = [op_values(scans[step.alias], step.op, op, i) for i in rows]
            else:  # reads several relations (a label per joined pair)
                bound = bound_aliases(step.op, op, scans, final.aliases)
                values = list(dict.fromkeys(tuple_values(step.op, op, scans, bound,
                                                         final.distinct(bound)[0])))
            self.runner.project(step.op, self.runner.layout(op), values, self.store)




def _precomputable(op_id: int, op, scans: dict[str, ScanData]) -> bool:
    """Every binding of `op` is a scan column of some relation of the core that has rows (over
    an empty relation there is nothing to ask: neither a sample nor the model is needed)."""
    return bool(op.bindings) and all(
        any(binding_column(op_id, i) in s.columns and s.rows for s in scans.values())
        for i in range(len(op.bindings)))


def pair_fractions(scans: dict[str, ScanData]) -> dict[tuple[str, str], float]:
    out = {}
    aliases = sorted(scans)
    for i, a in enumerate(aliases):
        for b in aliases[i + 1:]:
            keys = scans[a].key_columns & scans[b].key_columns
            if keys:
                out[(a, b)] = scans[a].key_match_fraction(scans[b], sorted(keys))
    return out


@dataclass(frozen=True)
class PlannedCore:
    """The part of a core the planner precomputes (operators whose bindings the scans hold)."""

    relations: tuple
    filters: tuple
    joins: tuple
    projections: tuple
    aggregates: tuple = ()  # DuckDB groups the rows and calls them with the plan's map chunk


def planned_core(core, ops: set[int]) -> PlannedCore:
    return PlannedCore(tuple(core.relations), tuple(o for o in core.filters if o in ops),
                       tuple(o for o in core.joins if o in ops),
                       tuple(o for o in core.projections if o in ops),
                       tuple(o for o in getattr(core, "aggregates", ()) if o in ops))
