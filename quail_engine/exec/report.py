"""The execution report: per operator estimates vs actuals, totals, the plan; JSON and text."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from quail_engine.exec.timeline import Timeline
from quail_engine.plan.cost import Work
from quail_engine.sql.ir import PREDICATE_KINDS


@dataclass
class OpReport:
    op: int
    kind: str
    rows_in: int = 0
    rows_out: int = 0
    est_rows_out: float | None = None
    selectivity_est: float | None = None
    selectivity_source: str | None = None
    selectivity_observed: float | None = None
    fresh_tokens: int = 0
    requested_tokens: int = 0
    kv_hit_tokens: int = 0      # prompt tokens read from resident KV instead of being run
    minimum_tokens: int = 0     # the prompts' distinct beginnings, each once (the least to run)
    minimum_attention_pairs: int = 0  # their causal query-key pairs
    est_tokens: float | None = None
    est_seconds: float | None = None
    seconds: float = 0.0        # its calls' wall time, less a model load one of them waited for
    prompts: int = 0
    cache_hits: int = 0
    unplanned: int = 0
    skipped: int = 0
    truncated: int = 0
    nulls: int = 0
    reasked: int = 0            # decisions the re-ask band answered at the reference precision
    engine_s: float = 0.0     # inside engine.run (the model's passes and their host work)
    host_wait_s: float = 0.0  # the host waiting for the engine (the rest overlaps it)
    gpu_pass_s: float = 0.0   # the GPU inside forward passes (EngineStats.gpu_pass_s)
    decode_tokens: int = 0    # generated tokens fed back into decode steps (one fewer per
    # answer than it has tokens: an answer's last token is never fed back)
    forced_tokens: int = 0    # answer tokens a grammar forced, in their prompts' prefill
    alloc_retries: int = 0    # the CUDA caching allocator's retries (EngineStats.alloc_retries)
    preemptions: int = 0      # answers sent back to wait for KV room (EngineStats.preemptions)
    map_rounds: int = 0       # an aggregate's map rounds over groups past the context
    map_chunks: int = 0       # ... and the chunk prompts they asked (in `prompts` too)
    work: Work = field(default_factory=Work)

    def to_json(self) -> dict:
        out = asdict(self)
        out.pop("work")
        if self.rows_in and self.kind in PREDICATE_KINDS:
            out["selectivity_observed"] = self.rows_out / self.rows_in
        # KV regret: the share of the tokens run that a run computing each beginning once
        # would not have run
        out["kv_regret"] = (max(0.0, (self.fresh_tokens - self.minimum_tokens) / self.fresh_tokens)
                            if self.fresh_tokens and self.minimum_tokens else None)
        return out


@dataclass
class Report:
    ops: dict[int, OpReport] = field(default_factory=dict)
    wall_s: float = 0.0
    sol_seconds: float = 0.0            # speed of light on the device's datasheet peak
    sol_seconds_sustained: float = 0.0  # ... on its measured sustained ceilings (GPUs)
    device: str = ""
    model: str = ""
    generation_model: str = ""  # the model that wrote generated text, when not `model`
    plans: list[str] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)
    rows: int = 0
    load_s: float = 0.0  # model loading, included in wall_s
    # what that load was made of, where the engine says (gpu/engine.GpuEngine.load_phases),
    # with the device start and the tokenizer; empty when nothing loaded
    load_phases: dict[str, float] = field(default_factory=dict)
    # wall seconds by phase (parse, check, device_wait, device_start, scan, estimate, plan,
    # filters, joins, projections, answer_keys, statement); the model load shows inside the
    # phase that first needed it (and as a `model_load` span in the timeline when an operator's
    # first miss loaded it)
    phases: dict[str, float] = field(default_factory=dict)
    timeline: Timeline = field(default_factory=Timeline)  # starts when the report is made

    @contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            end = time.perf_counter()
            self.phases[name] = self.phases.get(name, 0.0) + end - start
            self.timeline.phase(name, start, end)

    def op(self, op_id: int, kind: str) -> OpReport:
        if op_id not in self.ops:
            self.ops[op_id] = OpReport(op_id, kind)
        return self.ops[op_id]

    @property
    def fresh_tokens(self) -> int:
        return sum(o.fresh_tokens for o in self.ops.values())

    @property
    def requested_tokens(self) -> int:
        return sum(o.requested_tokens for o in self.ops.values())

    @property
    def minimum_tokens(self) -> int:
        return sum(o.minimum_tokens for o in self.ops.values())

    @property
    def kv_hit_tokens(self) -> int:
        return sum(o.kv_hit_tokens for o in self.ops.values())

    @property
    def cache_hits(self) -> int:
        return sum(o.cache_hits for o in self.ops.values())

    @property
    def truncated(self) -> int:
        return sum(o.truncated for o in self.ops.values())

    @property
    def reasked(self) -> int:
        return sum(o.reasked for o in self.ops.values())

    def total_work(self) -> Work:
        total = Work()
        for o in self.ops.values():
            total = total + o.work
        return total

    def to_json(self) -> dict:
        return {
            "operators": [self.ops[k].to_json() for k in sorted(self.ops)],
            "wall_s": self.wall_s, "fresh_tokens": self.fresh_tokens,
            "requested_tokens": self.requested_tokens, "sol_seconds": self.sol_seconds,
            "minimum_tokens": self.minimum_tokens, "kv_hit_tokens": self.kv_hit_tokens,
            "sol_seconds_sustained": self.sol_seconds_sustained,
            "cache_hits": self.cache_hits, "truncated": self.truncated, "rows": self.rows,
            "reasked": self.reasked,
            "load_s": self.load_s, "load_phases": self.load_phases, "phases": {k: round(v, 4) for k, v in self.phases.items()},
            "device": self.device, "model": self.model, "plans": self.plans,
            "generation_model": self.generation_model,
            "remarks": self.remarks, "timeline": self.timeline.to_json(),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def text(self) -> str:
        head = (f"{'op':>3} {'kind':<12} {'rows in':>8} {'rows out':>8} {'sel est':>7} "
                f"{'sel obs':>7} {'fresh tok':>9} {'req tok':>9} {'kv hit':>8} {'cache':>6} "
                f"{'est s':>7} {'s':>7}")
        lines = [head]
        for k in sorted(self.ops):
            o = self.ops[k].to_json()
            lines.append(
                f"{o['op']:>3} {o['kind']:<12} {o['rows_in']:>8} {o['rows_out']:>8} "
                f"{_f(o['selectivity_est']):>7} {_f(o['selectivity_observed']):>7} "
                f"{o['fresh_tokens']:>9} {o['requested_tokens']:>9} {o['kv_hit_tokens']:>8} "
                f"{o['cache_hits']:>6} {_f(o['est_seconds']):>7} {_f(o['seconds']):>7}")
            if o["map_rounds"]:
                lines.append(f"    groups past the context: {o['map_chunks']} map chunks in "
                             f"{o['map_rounds']} round(s), then one prompt per group")
        lines.append(f"total: {self.rows} rows, wall {self.wall_s:.2f} s, fresh "
                     f"{self.fresh_tokens} / requested {self.requested_tokens} tokens, "
                     f"speed of light {self.sol_seconds:.3g} s on {self.device}, "
                     f"cache hits {self.cache_hits}, truncated {self.truncated}"
                     + (f", re-asked at the reference precision {self.reasked}"
                        if self.reasked else ""))
        lines += [f"remark: {r}" for r in self.remarks]
        return "\n".join(lines)


def _f(value) -> str:
    return "-" if value is None else f"{value:.3g}"
