"""What the rules and the orderers know about a core: per-operator estimates and row counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from quail_engine.plan.cost import DeviceSpec, ModelSpec, Work, num_passes, seconds
from quail_engine.sql.ir import OpKind

DEFAULT_SELECTIVITY = 0.5


@dataclass(frozen=True)
class OpInfo:
    """Planner's view of one AI operator.

    `doc` is the document key of the alias the op reads (filters) - predicates with the same key
    share that document's KV. `tokens` maps alias -> mean tokens of that alias's part of the
    prompt; `question_tokens` is the rest (template text, chat framing, answer header).
    `stem_tokens` maps a join's anchor alias -> how many of the question's tokens every pair
    over that anchor starts with: they are encoded with the anchor, once, not per pair.
    """

    op: int
    kind: OpKind
    aliases: tuple[str, ...]
    doc: str = ""
    tokens: Mapping[str, float] = field(default_factory=dict)
    question_tokens: float = 16.0
    stem_tokens: Mapping[str, float] = field(default_factory=dict)
    shared: Mapping[str, float] = field(default_factory=dict)  # alias -> share of its tokens
    #                                            that begin like another row's (plan/sharing.py)
    selectivity: float = DEFAULT_SELECTIVITY
    selectivity_source: str = "default"   # hint | sample | default
    anchor_hint: str | None = None
    document: str | None = None  # an AI join's document relation (its prompt's first
    #                              argument's): the only anchor the prompt's layout shares
    as_written: bool = False
    shares_document: bool = True  # its prompt's layout puts a document in a shareable prefix
    answer_tokens: float = 0.0  # an aggregate's answer length, generated (0: the plan assumes)

    def doc_tokens(self, alias: str | None = None) -> float:
        alias = alias or (self.aliases[0] if self.aliases else "")
        return float(self.tokens.get(alias, 0.0))

    def shared_tokens(self, alias: str | None = None) -> float:
        """Mean tokens of the alias's part that rows beginning alike compute once."""
        alias = alias or (self.aliases[0] if self.aliases else "")
        return self.doc_tokens(alias) * float(self.shared.get(alias, 0.0))


@dataclass(frozen=True)
class PlanContext:
    """Inputs of planning. `rows`: estimated rows per alias after relational pushdown.
    `pair_fraction`: fraction of the cross product of two aliases kept by equality conjuncts
    (key: the sorted alias pair), 1.0 when absent. `columns`: scan columns per alias.
    `writer`: the model that writes generated answers when it is not `model` (the session's
    generation model), else None."""

    ops: Mapping[int, OpInfo]
    rows: Mapping[str, float]
    model: ModelSpec
    device: DeviceSpec
    pair_fraction: Mapping[tuple[str, str], float] = field(default_factory=dict)
    columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    token_budget: int = 8192
    resident: frozenset[tuple[int, str]] = frozenset()  # (join op, alias): anchor KV is left
    #                                                     resident by that alias's filters
    writer: ModelSpec | None = None

    def fraction(self, a: str, b: str) -> float:
        return float(self.pair_fraction.get(tuple(sorted((a, b))), 1.0))

    def is_keyed(self, a: str, b: str) -> bool:
        """Whether an equality key ties aliases `a` and `b` (their pairs' fraction is known)."""
        return tuple(sorted((a, b))) in self.pair_fraction

    def seconds(self, work: Work) -> float:
        return seconds(self.model, self.device, work,
                       num_passes(work.fresh_tokens, self.token_budget))
