"""Hand-built cores and contexts for golden plan tests (no SQL front end, no model)."""

from __future__ import annotations

from dataclasses import dataclass

from quail_engine.plan.context import OpInfo, PlanContext
from quail_engine.plan.cost import DeviceSpec, ModelSpec
from quail_engine.sql.ir import AiOp, Binding, JoinInfo
from quail_testing.equalities import Conjunct, equality

MODEL = ModelSpec.from_config({
    "num_hidden_layers": 30, "hidden_size": 576, "num_attention_heads": 9,
    "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152}, name="smollm2")
DEVICE = DeviceSpec("toy-cpu", flops=100e9, bandwidth=20e9)


@dataclass(frozen=True)
class Rel:
    alias: str
    scan_sql: str = ""
    columns: tuple[str, ...] = ()
    conjuncts: tuple[Conjunct, ...] = ()


@dataclass(frozen=True)
class Core:
    relations: tuple[Rel, ...]
    filters: tuple[int, ...] = ()
    joins: tuple[int, ...] = ()
    projections: tuple[int, ...] = ()


def filter_op(alias: str, column: str, question: str = "Is it good?") -> AiOp:
    return AiOp("ai_filter", question + " {0}",
                (Binding(0, f"{alias}.{column}", alias, column),), output_type="BOOLEAN")


def join_op(a: str, ca: str, b: str, cb: str, equi: tuple[str, ...] = ()) -> AiOp:
    return AiOp("ai_join", "Does {0} match {1}?",
                (Binding(0, f"{a}.{ca}", a, ca), Binding(1, f"{b}.{cb}", b, cb)),
                output_type="BOOLEAN",
                join=JoinInfo("inner", (a,), (b,), tuple(equality(e) for e in equi)))


def info(op: int, kind: str, aliases, tokens, sel=0.5, doc="", question=16.0,
         anchor=None, as_written=False) -> OpInfo:
    return OpInfo(op, kind, tuple(aliases), doc=doc, tokens=dict(tokens),
                  question_tokens=question, selectivity=sel, selectivity_source="hint",
                  anchor_hint=anchor, as_written=as_written)


def context(ops, rows, pair_fraction=None, columns=None) -> PlanContext:
    return PlanContext({o.op: o for o in ops}, dict(rows), MODEL, DEVICE,
                       pair_fraction=dict(pair_fraction or {}), columns=dict(columns or {}))
