"""`transpile(sql, read, write)`: relational SQL through sqlglot, AI functions through the IR.

Each AI call becomes the target's equivalent (PROMPT <-> tuple <-> CONCAT, result wrappers
re-added, Databricks filters as its idiom). Where the target has no equivalent or its semantics
differ, the emitter raises UnsupportedError (function, target, why) or logs a warning when a
faithful rewrite with a documented difference exists. Where the user kept a vendor result shape
(a bare `AI_CLASSIFY(...)` object), the shape is rebuilt around the target's call.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import re

from sqlglot import exp

from quail_engine.errors import QUOTE_LIMIT, shorten
from quail_engine.sql import dialects, shapes
from quail_engine.sql.emit import formats
from quail_engine.sql.emit.flatten import write_flatten
from quail_engine.sql.emit.one_call import bind_once
from quail_engine.sql.emit.unnest import unnest_calls
from quail_engine.sql.errors import SqlError, UnsupportedError
from quail_engine.sql.flatten import lower_flatten
from quail_engine.sql.ir import AiOp, OpKind, placeholder_name
from quail_engine.sql.nesting import nesting_guard
from quail_engine.sql.placeholder import op_id_of
from quail_engine.sql.query import lower_sql, read_tree
from quail_engine.sql.to_json import lower_to_json

# the name users see on warnings ("WARNING quail_engine.sql.transpile: ...") and tests filter on;
# the module is transpiler.py so that importing it by name cannot rebind the package's
# `transpile` (the function) to the module
log = logging.getLogger("quail_engine.sql.transpile")


def _token(op_id: int) -> str:
    return f"QUAILOP{op_id}X"


def emit_op(op, args: list[str], write: str) -> str:
    """The target spelling of one IR node, with its canonical result wrapper."""
    return importlib.import_module(f"quail_engine.sql.emit.{write}").emit(op, args)


def transpile(sql: str, read: str, write: str, *, keep_source: bool = True) -> str:
    """`sql` (dialect `read`) in dialect `write`. With `keep_source` and read == write, the
    statement is only re-printed; otherwise every AI call goes through the emitters."""
    read, write = dialects.get(read).NAME, dialects.get(write).NAME
    with nesting_guard(sql, read):
        return _transpile(sql, read, write, keep_source)


class _Once(logging.Filter):
    """Each distinct warning once per transpile: one call written in several SELECT blocks is
    several operators, each emitted (and warned about) on its own."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


def _transpile(sql: str, read: str, write: str, keep_source: bool) -> str:
    once = _Once()
    log.addFilter(once)
    try:
        return _rewrite(sql, read, write, keep_source)
    finally:
        log.removeFilter(once)


def _rewrite(sql: str, read: str, write: str, keep_source: bool) -> str:
    if read == write and keep_source:
        _, ops, _ = lower_sql(sql, read, runnable=False)
        out = read_tree(sql, read).sql(dialect=dialects.sqlglot_dialect(write))
        return _read_back(out, ops, read, write)
    lowered, ops, _ = lower_sql(sql, read, runnable=False)
    tree = lowered.tree
    _pick_fields(tree)
    texts: dict[str, str] = {}
    for call in list(tree.find_all(exp.Anonymous)):
        op_id = op_id_of(call)
        if op_id is None or call.name.lower() != placeholder_name(op_id):
            continue
        token = _token(op_id)
        if token not in texts:  # each call emitted and warned about once
            built = lowered.built[op_id]
            args = [e.sql(dialect=dialects.sqlglot_dialect(write)) for e in built.exprs]
            texts[token] = _emitted(ops[op_id], args, read, write)
            _warn_model(ops[op_id], read, write)
            _warn_files(ops[op_id], read, write)
            if built.shape and built.shape not in shapes.PORTABLE and write != read and \
                    not built.extra.get("tvf"):
                log.warning("%s -> %s: the %s result shape of %s is rebuilt with JSON/STRUCT "
                            "functions; strip it (e.g. :labels[0]) for a portable query", read,
                            write, read, shorten(ops[op_id].origin, QUOTE_LIMIT))
        call.replace(exp.Anonymous(this=token))
    calls = {_token(i): op for i, op in enumerate(ops)}
    if read == "snowflake" and write == "duckdb":
        lower_flatten(tree)  # the run's own DuckDB form: sqlglot's UNNEST(input => ...) is none
    elif read == "snowflake":
        write_flatten(tree, calls, write)
    if read == "bigquery" and write == "duckdb":
        lower_to_json(tree)  # DuckDB's JSON-typed to_json, not sqlglot's text of it
    unnest_calls(tree, calls, write)
    if write != "duckdb":
        _drop_json_transforms(tree)
        _safe_casts(tree, write)
    if write in PATH_DIALECTS:
        _paths_on_objects(tree, texts)
    for token in texts:
        bind_once(tree, token, write)
    out = tree.sql(dialect=dialects.sqlglot_dialect(write))
    for token, text in texts.items():
        out = out.replace(f"{token}()", _paren(text))
    return _read_back(out, ops, read, write)


def _pick_fields(tree: exp.Expr) -> None:
    """`STRUCT(a := x, b := y, ...).a` as `x`: a field read of a rebuilt vendor shape (BigQuery's
    `AI.GENERATE(..., output_schema => 'a STRING, ...').a`) is that field's own expression.
    The whole struct names the call once per field, plus its status; written in a target
    without a STRUCT, each mention is a model call the warehouse runs and bills, so reading
    one field would ask the model for every field and the status (three calls for `.a`)."""
    for dot in list(tree.find_all(exp.Dot)):
        struct, field = dot.this, dot.expression
        if not isinstance(struct, exp.Struct) or not isinstance(field, exp.Identifier):
            continue
        values = {e.this.name.lower(): e.expression for e in struct.expressions
                  if isinstance(e, exp.PropertyEQ)}
        if field.name.lower() in values:
            dot.replace(values[field.name.lower()].copy())


def _emitted(op: AiOp, args: list[str], read: str, write: str) -> str:
    """`op` in `write`'s spelling. A show_details call is Snowflake's and DuckDB's own form
    (`show_details := true`); elsewhere (shapes.CREATED's targets) the text call is packaged
    in the vendor's object, its model and token counts NULL: the text in `choices`, or under
    a response format the parsed answer in `structured_output`, as quail answers the source."""
    if not shapes.shows_details(op) or write not in shapes.CREATED:
        return emit_op(op, args, write)
    plain = dataclasses.replace(op, output_type="VARCHAR", task_args=tuple(
        a for a in op.task_args if a != shapes.SHOW_DETAILS))
    inner = _token(-1)
    shape = shapes.DETAILS_REBUILT if formats.schema(op) is None else shapes.DETAILS_STRUCTURED
    packaged = shapes.wrap(shape, exp.Anonymous(this=inner))
    log.warning("%s -> %s: the show_details object of %s is rebuilt around the text; its model "
                "and usage are NULL there", read, write, shorten(op.origin, QUOTE_LIMIT))
    text = packaged.sql(dialect=dialects.sqlglot_dialect(write))
    text = re.sub(r"quail_created\(\)", shapes.CREATED[write], text, flags=re.IGNORECASE)
    text = re.sub(r"quail_parsed\(", f"{shapes.PARSED[write]}(", text, flags=re.IGNORECASE)
    return text.replace(f"{inner}()", emit_op(plain, args, write))


# where a call's rebuilt vendor shape is an OBJECT (OBJECT_CONSTRUCT), whose fields are read
# as `v:field` or `v['field']`; `v.field` is a STRUCT's (BigQuery, Databricks, DuckDB)
PATH_DIALECTS = ("snowflake",)
_PATH_END = re.compile(r":[\w\[\]]+$")


def _paths_on_objects(tree: exp.Expr, texts: dict[str, str]) -> None:
    """`<shape>.field` on a call's rebuilt result as `<shape>['field']`; after a JSON path
    (`AI_EXTRACT(...):response.field`) the dot continues the path and stays."""
    for dot in list(tree.find_all(exp.Dot)):
        this = dot.this
        if isinstance(this, exp.Anonymous) and _PATH_END.search(texts.get(this.name, "")):
            continue
        if isinstance(dot.expression, exp.Identifier) and not isinstance(
                this, exp.JSONExtract) and any(
                isinstance(n, exp.Anonymous) and n.name in texts for n in this.walk()):
            key = exp.Literal.string(dot.expression.name)
            dot.replace(exp.Bracket(this=dot.this, expressions=[key]))


def _warn_model(op: AiOp, read: str, write: str) -> None:
    """A model or endpoint name is the source warehouse's; the target has its own names."""
    if op.options.model and read != write and write != "duckdb":
        log.warning("%s -> %s: the model %s of %s is a %s name; replace it with a %s model or "
                    "endpoint", read, write, shorten(repr(op.options.model), 80),
                    shorten(_name(op), 80), read, write)


def _warn_files(op: AiOp, read: str, write: str) -> None:
    """A file argument (Snowflake FILE, Databricks files =>, BigQuery ObjectRef) becomes a
    slot of the target's prompt: its file function is the source warehouse's."""
    files = [b.sql for b in op.bindings if b.modality != "text"]
    if files and read != write:
        log.warning("%s -> %s: the file argument %s of %s is written as part of the prompt; "
                    "rewrite it with %s's own file reference", read, write,
                    shorten(files[0], 80), shorten(_name(op), 80), write)


def _drop_json_transforms(tree: exp.Expr) -> None:
    """DuckDB's json_transform(v, schema) (a vendor STRUCT shape read from a JSON value) as
    `v` itself: the other warehouses read a JSON object's fields by name (`:label`,
    JSON_VALUE, `.label`), and none spells json_transform."""
    for node in list(tree.find_all(exp.Anonymous)):
        if node.name.lower() == "json_transform" and node.expressions:
            node.replace(node.expressions[0])


# a nested type has no TRY_CAST in Snowflake; the grammar already gave it the JSON kind asked for
_NESTED = (exp.DType.ARRAY, exp.DType.STRUCT, exp.DType.MAP, exp.DType.OBJECT)


def _safe_casts(tree: exp.Expr, write: str) -> None:
    """A typed field's TRY(CAST(v AS t)) (shapes.typed: a value that does not convert is NULL,
    never an aborted query) in the target's own spelling, which sqlglot does not write: it drops
    TRY ('Unsupported TRY function'), leaving a CAST that aborts the warehouse's query on one
    bad answer. BigQuery SAFE_CAST, Databricks TRY_CAST; Snowflake's TRY_CAST takes only a
    string, so the VARIANT is read as its text first."""
    for node in list(tree.find_all(exp.Try)):
        cast = node.this
        if not isinstance(cast, exp.Cast):
            continue
        value, to = cast.this, cast.to
        if write == "snowflake":
            if to.is_type(*_NESTED):
                node.replace(cast)
                continue
            value = exp.Cast(this=value, to=exp.DataType.build("VARCHAR"))
        node.replace(exp.TryCast(this=value, to=to))


def _read_back(out: str, ops: list[AiOp], read: str, write: str) -> str:
    """`out`, once it reads back in `write` with the same AI operators; otherwise refuse,
    naming the functions, rather than hand the user SQL their warehouse (or we) cannot read."""
    names = ", ".join(dict.fromkeys(_name(op) for op in ops)) or "the statement"
    try:
        _, again, _ = lower_sql(out, write, runnable=False)
    except SqlError as exc:
        raise UnsupportedError(f"{names} cannot be written in {write}: the rewritten SQL does "
                               f"not read back ({exc.reason}); strip vendor result shapes or "
                               "rewrite the call by hand", out, write) from None
    if not _same_kinds(ops, again):
        raise UnsupportedError(f"{names} cannot be written in {write}: the rewritten SQL reads "
                               f"back as {_kinds(again)}, not {_kinds(ops)}", out, write)
    return out


def _kinds(ops: list[AiOp]) -> str:
    """The operator kinds as their names, sorted: 'ai_filter, ai_generate'."""
    return ", ".join(sorted(str(op.op) for op in ops)) or "no AI function"


def _same_kinds(ops: list[AiOp], again: list[AiOp]) -> bool:
    """Whether `again` reads back as `ops`' operators. A generation under a response format
    and an extraction count as one: BigQuery spells the first as AI.GENERATE(...,
    output_schema => ...), which quail reads as ai_extract (emit/bigquery.py). Each side counts
    one call per distinct question: the same call read whole and through a path
    (`AI_CLASSIFY(b, [...])` and `AI_CLASSIFY(b, [...]):labels[0]`) is two operators in the
    source and one call in a target that writes both mentions alike."""
    def family(op: AiOp) -> str:
        return str(OpKind.AI_GENERATE if op.op == OpKind.AI_EXTRACT else op.op)

    def calls(side: list[AiOp]) -> list[str]:
        asked = {(family(op), op.template, tuple((b.index, b.sql) for b in op.bindings),
                  op.labels, op.multi, op.task, op.task_args, op.instruction, op.examples)
                 for op in side}  # (a binding's alias: a target's subquery may not resolve it)
        return sorted(key[0] for key in asked)
    return calls(ops) == calls(again)


def _name(op: AiOp) -> str:
    return op.origin.split("(", 1)[0].strip() or op.op


def _paren(text: str) -> str:
    """Comparisons (`... = 'yes'`) need parentheses inside larger expressions."""
    return f"({text})" if text.endswith("= 'yes'") else text
