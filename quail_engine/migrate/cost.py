"""What a dbt project's AI calls cost on their warehouse, and the time they take on Quail.

`estimate` reads each model's compiled SQL with Quail's parser and, given a DuckDB file with the
project's tables, counts the tokens every AI call would read (sample_tokens.py) with the default
model's tokenizer. Beside them: the warehouse's published price (prices.py), or the price the
user gives for it (--price, labelled as given), and the time at our measured rates (RATES, each
from a committed result file under bench/results/), with the GPU's cost at an hourly price the
user gives. Without a database the tokens are unknown: no guess.
`render` lays the estimates out as the lines of a plain-text table.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
from sqlglot import exp

from quail_engine.errors import ExecutionError, QuailError
from quail_engine.exec.facade import SessionConfig, model_text
from quail_engine.migrate import prices
from quail_engine.migrate.calls import CompiledNode, FoundCall
from quail_engine.migrate.cost_table import table_lines
from quail_engine.migrate.rates import rate
from quail_engine.migrate.sample_tokens import SampleCounter
from quail_engine.sql.op_kinds import OpKind, spec
from quail_engine.sql.query import parse

stage = logging.getLogger("quail_engine.stage")
_VENDOR_NAME = re.compile(r"\s*(?:GET_PATH\(|TO_BOOLEAN\(|NOT\s+)*([A-Za-z_][\w.]*)\s*\(", re.I)


@dataclass(frozen=True)
class CallCost:
    """One AI call of a model. `prompts`: the prompts Quail asks (sample_tokens.TokenCount);
    `input_tokens`/`output_tokens`: None when unknown (output: an upper bound, for generative
    calls only); `price`: None when no published price was found; `note`: why something is
    unknown. Seconds are None where no rate was measured; `is_decode_excluded`: the seconds
    cover the prompts' prefill only (no decode rate was measured)."""

    function: str
    op_kind: str | None
    prompts: float | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None
    is_extrapolated: bool = False
    sampled_rows: int = 0
    price: prices.Price | None = None
    gpu_seconds: float | None = None
    cpu_seconds: float | None = None
    is_decode_excluded: bool = False
    note: str = ""

    @property
    def warehouse_cost(self) -> float | None:
        if self.price is None or self.input_tokens is None:
            return None
        return self.price.cost(self.input_tokens, self.output_tokens)


@dataclass(frozen=True)
class ModelCost:
    node: str
    path: str
    dialect: str
    calls: tuple[CallCost, ...]
    gpu_price_per_hour: float | None = None
    note: str = ""
    credit_price: float | None = None  # US dollars per credit or DBU (--credit-price)

    def _total(self, name: str) -> float | None:
        values = [getattr(c, name) for c in self.calls]
        return None if not values or None in values else float(sum(values))

    @property
    def input_tokens(self) -> float | None:
        return self._total("input_tokens")

    @property
    def output_tokens(self) -> float | None:
        """Upper bound of generated tokens (0 when no call generates)."""
        if self.input_tokens is None:
            return None
        return float(sum(c.output_tokens or 0.0 for c in self.calls))

    @property
    def is_extrapolated(self) -> bool:
        return any(c.is_extrapolated for c in self.calls)

    def _in_dollars(self, call: CallCost) -> bool:
        return (self.credit_price is not None and call.price is not None
                and call.price.unit in prices.CREDIT_UNITS)

    @property
    def warehouse_cost(self) -> float | None:
        """Total at the calls' prices (credits and DBUs in dollars when a credit price is
        given); None when a call's tokens or price is unknown."""
        costs = [c.warehouse_cost for c in self.calls]
        if not costs or None in costs:
            return None
        return float(sum(cost * (self.credit_price if self._in_dollars(c) else 1.0)
                         for c, cost in zip(self.calls, costs)))

    @property
    def warehouse_unit(self) -> str | None:
        units = {"USD" if self._in_dollars(c) else c.price.unit
                 for c in self.calls if c.price is not None}
        return units.pop() if len(units) == 1 else None

    @property
    def is_user_priced(self) -> bool:
        """Whether the warehouse cost rests on a figure the user gave (--price, or
        --credit-price turning credits into dollars) rather than a published price only."""
        return any(c.price is not None and (c.price.user_given or self._in_dollars(c))
                   for c in self.calls)

    @property
    def gpu_seconds(self) -> float | None:
        return self._total("gpu_seconds")

    @property
    def cpu_seconds(self) -> float | None:
        return self._total("cpu_seconds")

    @property
    def gpu_cost(self) -> float | None:
        if self.gpu_price_per_hour is None or self.gpu_seconds is None:
            return None
        return self.gpu_seconds / 3600.0 * self.gpu_price_per_hour


def estimate(nodes: Sequence[CompiledNode], calls: Sequence[FoundCall], *,
             database: str | None, sample_rows: int = 1000,
             gpu_price_per_hour: float | None = None, text=None,
             user_prices: Sequence[prices.Price] = (),
             credit_price: float | None = None) -> list[ModelCost]:
    """One ModelCost per node with AI calls, in `nodes` order. `database`: a DuckDB file with
    the project's tables (None: tokens unknown). `text`: the PromptText tokens are counted
    with (default: the default model's, exec.facade.model_text). `user_prices`: prices the
    user gave (prices.parse_prices), winning over the published ones; `credit_price`: US
    dollars per credit or DBU, to show those costs in dollars."""
    if sample_rows < 1:
        raise ExecutionError(f"the sample must hold at least one row, got {sample_rows}")
    if gpu_price_per_hour is not None and gpu_price_per_hour < 0:
        raise ExecutionError(f"the GPU price per hour must not be negative, got "
                             f"{gpu_price_per_hour}")
    if credit_price is not None and not credit_price >= 0:
        raise ExecutionError(f"the price of a credit must not be negative, got {credit_price}")
    by_node: dict[str, list[FoundCall]] = {}
    for call in calls:
        by_node.setdefault(call.node, []).append(call)
    counter = data = None
    if database is not None:
        if text is None:
            text = model_text(SessionConfig())[0]
        data = _DataFile(database)
        counter = SampleCounter(data.con, text, sample_rows)
    out = []
    known = {n.node for n in nodes}
    missing = [CompiledNode(c[0].node, c[0].path, "", None, "not among the compiled nodes")
               for name, c in by_node.items() if name not in known]
    for node in [*nodes, *missing]:
        if node.node in by_node:
            costs, note = _model_cost(node, by_node[node.node], counter, data,
                                      tuple(user_prices))
            out.append(ModelCost(node.node, node.path, node.dialect, costs, gpu_price_per_hour,
                                 note, credit_price))
    return out


def unmatched_prices(costs: Sequence[ModelCost], user_prices: Sequence[prices.Price]
                     ) -> list[str]:
    """A line for each user-given price no AI call used (a misspelled function or model)."""
    used = {c.price.item.upper() for m in costs for c in m.calls
            if c.price is not None and c.price.user_given}
    functions = sorted({c.function for m in costs for c in m.calls})
    return [f"{p.source}: no AI call of the project is priced by it (its calls: "
            f"{', '.join(functions) or 'none'})" for p in user_prices
            if p.item.upper() not in used]


class _DataFile:
    """A DuckDB file of the project's tables, read-only, attached under its file name (the
    catalog name dbt-duckdb gives it) and used by default, so bare and schema-qualified names
    resolve. `expose` makes the catalog names a statement reads (dbt compiled it against
    another file: `"compile"."main"."reviews"`) views over the same tables."""

    def __init__(self, database: str):
        path = Path(database)
        if not path.is_file():
            raise ExecutionError(f"database {database!r} does not exist")
        self.con = duckdb.connect()
        self.catalog = path.stem
        try:
            self.con.execute(f"ATTACH {_literal(str(path))} AS {_ident(self.catalog)} "
                             "(READ_ONLY)")
            self.con.execute(f"USE {_ident(self.catalog)}")
        except duckdb.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ExecutionError(f"database {database!r}: cannot open it: {first}") from None
        self._exposed = {self.catalog.lower()}

    def expose(self, parsed) -> None:
        try:
            tree = parsed.statement()
        except QuailError:
            return
        names = {t.catalog for t in tree.find_all(exp.Table) if t.catalog}
        for name in sorted(n for n in names if n.lower() not in self._exposed):
            self._exposed.add(name.lower())
            try:
                self.con.execute(f"ATTACH ':memory:' AS {_ident(name)}")
            except duckdb.Error:  # a name DuckDB keeps (system, temp): the scan says what fails
                continue
            rows = self.con.execute(
                "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? "
                "UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE "
                "database_name = ? AND NOT internal", [self.catalog, self.catalog]).fetchall()
            for schema in sorted({s for s, _ in rows}):
                self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(name)}.{_ident(schema)}")
            for schema, table in rows:
                self.con.execute(
                    f"CREATE VIEW {_ident(name)}.{_ident(schema)}.{_ident(table)} AS SELECT * "
                    f"FROM {_ident(self.catalog)}.{_ident(schema)}.{_ident(table)}")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _model_cost(node: CompiledNode, found: list[FoundCall], counter, data,
                user: tuple[prices.Price, ...]) -> tuple[tuple[CallCost, ...], str]:
    """The node's calls with what is known of them, and a note on the whole node."""
    plain = tuple(CallCost(c.function, c.op_kind,
                           price=prices.lookup(node.dialect, c.function, None, user),
                           note="refused: it does not move" if c.status == "refused" else "")
                  for c in found)
    if node.compiled_sql is None:
        return plain, f"tokens unknown: it does not compile ({node.error})"
    try:
        parsed = parse(node.compiled_sql, node.dialect)
    except QuailError as exc:
        return plain, f"tokens unknown: Quail cannot read it ({exc})"
    if counter is None:
        return _calls(node, parsed, found, {}, user), "tokens unknown: no database given"
    stage.info("counting the tokens of %s's AI calls on its data", node.node)
    data.expose(parsed)
    return _calls(node, parsed, found, counter.count(parsed), user), ""


def _calls(node: CompiledNode, parsed, found: list[FoundCall], counts: dict,
           user: tuple[prices.Price, ...]) -> tuple[CallCost, ...]:
    unused = list(found)
    out = []
    for op_id, op in enumerate(parsed.ai_ops):
        call = _match(op, unused)
        function = call.function if call is not None else _vendor_name(op.origin)
        refused = call is not None and call.status == "refused"
        price = prices.lookup(node.dialect, function, op.options.model, user)
        count = counts.get(op_id)
        if count is None:
            out.append(CallCost(function, str(op.op), price=price,
                                note="refused: it does not move" if refused else ""))
        elif isinstance(count, str):
            out.append(CallCost(function, str(op.op), price=price,
                                note=f"tokens unknown: {count}"))
        else:
            out.append(_timed(CallCost(
                function, str(op.op), count.prompts, count.input_tokens, count.output_tokens,
                count.is_extrapolated, count.sampled_rows, price,
                note="refused: it does not move" if refused else ""), op.op, refused))
    return tuple(out)


def _timed(call: CallCost, kind: OpKind, refused: bool) -> CallCost:
    """`call` with its time at the measured rates (none for a call that does not move, or
    whose kind has no measured rate: embeddings, token counts). A kind that runs several
    prompts per row (`OpSpec.num_requests`: a similarity reads each text after the other, and
    its second texts after a content-free document), each as long as the row's one, takes that
    many times its tokens' time."""
    kind_spec = spec(kind)
    cost = kind_spec.cost
    if refused or cost is None:
        return call
    work = "pairs" if cost == "pairs" else "prefill"  # a decode: its prompts' prefill
    tokens = (call.input_tokens or 0.0) * kind_spec.num_requests
    return dataclasses.replace(call, gpu_seconds=tokens / rate("gpu", work).tokens_per_s,
                               cpu_seconds=tokens / rate("cpu", work).tokens_per_s,
                               is_decode_excluded=cost == "decode")


def _match(op, unused: list[FoundCall]) -> FoundCall | None:
    """The found call `op` (an ir.AiOp) stands for: the same SQL, else the first with its
    vendor function name in the op's SQL."""
    origin = " ".join(op.origin.split()).lower()
    for test in (lambda c: " ".join(c.sql.split()).lower() == origin,
                 lambda c: c.function.lower() in origin):
        for call in unused:
            if test(call):
                unused.remove(call)
                return call
    return None


def _vendor_name(origin: str) -> str:
    found = _VENDOR_NAME.match(origin or "")
    return found.group(1) if found else "?"


def render(costs: Sequence[ModelCost]) -> list[str]:
    """The estimates as plain-text table lines: one row per model, then what the marks mean."""
    return table_lines(costs)
