"""The canonical AI-SQL IR: one node per AI operator, whatever the vendor spelling.

Every dialect front end lowers its functions to `AiOp`; the planner plans `AiOp`s; each dialect's
emitter turns an `AiOp` back into its own spelling. An operator kind's facts (output type,
predicate or not, readout, ...) are its `OpSpec` in op_kinds.py. See ../../docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from typing import Any

from quail_engine.sql.op_kinds import OpKind, kinds

OPS = tuple(OpKind)
PREDICATE_KINDS = kinds(is_predicate=True)  # one boolean per row (per pair for a join)


def binding_column(op_id: int, index: int) -> str:
    """The scan column holding slot `index` of operator `op_id`: `b_<op>_<i>`."""
    return f"b_{op_id}_{index}"


def placeholder_name(op_id: int) -> str:
    """The DuckDB function standing for operator `op_id` in a query's SQL: `quail_ai_<op>`."""
    return f"quail_ai_{op_id}"


def key_column(n: int) -> str:
    """The scan column holding the `n`-th equi-join key of a core: `k_<n>`."""
    return f"k_{n}"


_BINDING_COLUMN = re.compile(r"^b_(\d+)_(\d+)$")


def parse_binding_column(column: str) -> tuple[int, int] | None:
    """`(op_id, index)` of a binding column (see `binding_column`), or None for any other."""
    m = _BINDING_COLUMN.match(column)
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_binding_column(column: str) -> bool:
    return column.startswith("b_")


def is_key_column(column: str) -> bool:
    return column.startswith("k_")


ON_ERROR = ("null", "fail", "details")
FREE_TEXT = "free text"  # AiOp.schema of an answer the front end found no schema for
JOIN_KINDS = ("inner", "left", "semi", "anti", "cross")


@dataclass(frozen=True)
class Binding:
    """Slot `{index}` of a prompt template: the SQL expression that fills it.

    `alias`/`column` name the source when the expression is a plain column reference
    (`alias` is the relation alias as written, or None when unqualified and unresolved);
    `sql` is the expression's DuckDB text, written once by the front end: the IR's text form
    and the key of the document it reads. `node` is the expression as the front end parsed it
    (a sqlglot node, opaque here so the IR imports no sqlglot; None in a binding built by
    hand): the front end rewrites it and puts it into scans, and never reads `sql` back.
    """

    index: int
    sql: str
    alias: str | None = None
    column: str | None = None
    type: str = "VARCHAR"
    modality: str = "text"
    node: Any = field(default=None, compare=False, repr=False, metadata={"tree": True})

    def to_text(self) -> str:
        return f"{{{self.index}}}={self.sql}"


@dataclass(frozen=True)
class Label:
    name: str
    description: str | None = None


@dataclass(frozen=True)
class GenParams:
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Options:
    """Everything about an operator that is not its prompt or labels."""

    model: str | None = None            # vendor model / endpoint hint, kept verbatim
    selectivity: float | None = None    # planner hint, 0..1
    anchor: str | None = None           # planner hint: alias whose KV is computed once
    order: str | None = None            # 'as_written' disables filter reordering
    gen: GenParams = field(default_factory=GenParams)
    on_error: str = "null"
    max_error_ratio: float | None = None
    vendor: tuple[tuple[str, str], ...] = ()  # options kept for round trips (connection_id, ...)


@dataclass(frozen=True)
class Equality:
    """An equality conjunct between two relations (`r.product_id = p.product_id`): one side
    reads relation `left` alone, the other `right` alone. `node` is the conjunct as the front
    end parsed it (a sqlglot EQ, opaque here so the IR imports no sqlglot; the front end's own
    copy, which nothing rewrites): the IR and the plan hold the tree, and `sql` writes its
    DuckDB text from it for the text forms (explain, golden plans), never to be read back."""

    left: str
    right: str
    node: Any = field(repr=False)

    @property
    def sql(self) -> str:
        return self.node.sql(dialect="duckdb")


@dataclass(frozen=True)
class JoinInfo:
    """How an `ai_join` combines its two sides. `left`/`right` are relation aliases; `equi` are
    the equality conjuncts between them that restrict candidate pairs before any prompt runs."""

    kind: str
    left: tuple[str, ...]
    right: tuple[str, ...]
    equi: tuple[Equality, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "left": list(self.left), "right": list(self.right),
                "equi": [e.sql for e in self.equi]}


@dataclass(frozen=True)
class AiOp:
    """One AI operator. `template` holds `{i}` slots filled by `bindings[i]`.

    `wrapper` names the vendor's result packaging the user wrote around the call (e.g.
    `snowflake:labels[0]`, `bigquery:.result`, `databricks:=yes`), so emitters can re-add it.
    `origin` is the user's original SQL fragment, quoted in errors.
    """

    op: OpKind
    template: str
    bindings: tuple[Binding, ...] = ()
    labels: tuple[Label, ...] | None = None
    options: Options = field(default_factory=Options)
    output_type: str = "VARCHAR"
    wrapper: str | None = None
    task: str | None = None             # summarize, translate, fix_grammar, mask, sentiment, ...
    task_args: tuple[tuple[str, str], ...] = ()
    instruction: str | None = None      # task text kept apart from content (AI_AGG, ...)
    multi: bool = False                 # multi-label classify
    examples: tuple[tuple[str, str], ...] = ()
    join: JoinInfo | None = None
    context: str = "select"             # where, join_on, select, having, order_by, aggregate
    negated: bool = False               # a WHERE / ON conjunct as `NOT <predicate>`
    # a classification planned as a filter: its conjunct `label IN (...)` / `= '...'` (NOT IN /
    # <> with `negated`); rows whose label is one of these pass
    pass_labels: tuple[str, ...] | None = None
    # a score compared with literals (`AI.SCORE(...) > 0.7`, `BETWEEN a AND b`), in the SQL's
    # own units: the decisions the comparison makes of it, which the re-ask band checks
    thresholds: tuple[float, ...] = ()
    origin: str = field(default="", compare=False)
    # the JSON schema a generated answer must match (sql/response_schema.json_schema), read when
    # the front end builds the node, so the executor parses no response format or return type;
    # FREE_TEXT where it found none; None in a node built by hand (read then)
    schema: Any = field(default=None, compare=False, repr=False, metadata={"tree": True})

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown IR operator {self.op!r}; "
                             f"expected one of {tuple(str(k) for k in OPS)}")
        object.__setattr__(self, "op", OpKind(self.op))
        if self.options.on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {self.options.on_error!r}")

    def passes(self, answer: object) -> bool:
        """Whether a row (a pair for a join) with this predicate answer meets its conjunct:
        TRUE, or FALSE when `negated` (`NOT NULL` is NULL: a NULL answer never passes); for a
        classification with `pass_labels`, a label among them (not among them when `negated`;
        a NULL label passes neither `IN` nor `NOT IN`)."""
        if self.pass_labels is not None:
            return answer is not None and (answer in self.pass_labels) != self.negated
        return answer is (not self.negated)

    @property
    def unasked_answer(self) -> bool | None:
        """What a complete predicate answers for a row the plan eliminated (never asked): one
        that fails its conjunct either way, FALSE, or NULL under `NOT`."""
        return None if self.negated else False

    @property
    def aliases(self) -> tuple[str, ...]:
        """Relation aliases the prompt reads, in first-use order."""
        seen: dict[str, None] = {}
        for b in self.bindings:
            if b.alias is not None:
                seen.setdefault(b.alias, None)
        return tuple(seen)

    def to_text(self) -> str:
        """Stable one-line form, used by golden tests and `quail explain`."""
        parts = [f"template={json.dumps(self.template, ensure_ascii=False)}"]
        if self.bindings:
            parts.append("bindings=[" + ", ".join(b.to_text() for b in self.bindings) + "]")
        if self.labels is not None:
            parts.append("labels=[" + ", ".join(_label_text(lb) for lb in self.labels) + "]")
        for name in ("task", "instruction", "wrapper"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={json.dumps(value, ensure_ascii=False)}")
        if self.task_args:
            parts.append("task_args={" + ", ".join(f"{k}={v}" for k, v in self.task_args) + "}")
        if self.multi:
            parts.append("multi=true")
        if self.negated:
            parts.append("negated=true")
        if self.pass_labels is not None:
            parts.append("pass_labels=[" + ", ".join(json.dumps(x, ensure_ascii=False)
                                                     for x in self.pass_labels) + "]")
        if self.thresholds:
            parts.append("thresholds=[" + ", ".join(f"{t:g}" for t in self.thresholds) + "]")
        if self.examples:
            parts.append(f"examples={len(self.examples)}")
        if self.join is not None:
            j = self.join
            parts.append(f"join={j.kind}({','.join(j.left)} x {','.join(j.right)}"
                         + (f"; {' AND '.join(e.sql for e in j.equi)}" if j.equi else "")
                         + ")")
        opts = _options_text(self.options)
        if opts:
            parts.append(f"options={{{opts}}}")
        parts.append(f"-> {self.output_type}")
        return f"{self.op}(" + "; ".join(parts[:-1]) + ") " + parts[-1]

    def to_json(self) -> dict[str, Any]:
        out = _to_plain(self)
        out.pop("origin", None)
        out["origin"] = self.origin
        return out


def _label_text(label: Label) -> str:
    name = json.dumps(label.name, ensure_ascii=False)
    if label.description is None:
        return name
    return f"{name}:{json.dumps(label.description, ensure_ascii=False)}"


def _options_text(o: Options) -> str:
    items: list[str] = []
    for f in fields(o):
        value = getattr(o, f.name)
        if f.name == "gen":
            items += [f"{g.name}={getattr(value, g.name)!r}" for g in fields(value)
                      if getattr(value, g.name) not in (None, ())]
        elif f.name == "vendor":
            items += [f"{k}={v}" for k, v in value]
        elif value is not None and value != f.default:
            items.append(f"{f.name}={value!r}")
    return ", ".join(items)


def _to_plain(value: Any) -> Any:
    if isinstance(value, Equality):
        return value.sql
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _to_plain(getattr(value, f.name)) for f in fields(value)
                if not f.metadata.get("tree")}
    if isinstance(value, tuple | list):
        return [_to_plain(v) for v in value]
    return value
