"""DuckDB SQL with quail's canonical AI functions, for users with no warehouse:

    ai_filter(prompt)          ai_classify(input, ['a', 'b'])     ai_score(prompt)
    ai_generate(prompt)        ai_extract(input, ['field', ...])  ai_aggregate(input, 'instr')
    ai_embed(input)            ai_similarity(a, b)                ai_count_tokens(input)

`prompt` is a string, a column, `prompt('Is {0} about {1}?', a, b)`, `concat(...)` or `||`;
`ai_filter('Is {0} good?', review)` is short for `ai_filter(prompt('Is {0} good?', review))`.
Options are named arguments: `model := 'x'`, `max_tokens := 20`, `on_error := 'fail'`,
`selectivity := 0.1`, `multi := true`, `instruction := '...'`, `task := 'translate'`, ...

This module reads the named arguments every function shares; each function's builder is in
quail_engine/sql/functions/<kind>.py.
"""

from __future__ import annotations

import json

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.parsers.duckdb import DuckDBParser

from quail_engine.errors import shorten
from quail_engine.sql import scales
from quail_engine.sql.build import Built, make
from quail_engine.sql.call import Call
from quail_engine.sql.dialects.common import append, text_input, text_prompt, untyped_ai
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import GenParams, Options
from quail_engine.sql.literals import labels, literal
from quail_engine.sql.prompt import Prompt
from quail_engine.sql.validate import Site, number, refuse

NAME = "duckdb"
OPTION_KEYS = ("model", "selectivity", "anchor", "order", "on_error", "max_error_ratio")
GEN_KEYS = ("max_tokens", "temperature", "top_p", "stop")
FIELD_KEYS = ("multi", "instruction", "task", "output_type")
# task arguments the other dialects' functions carry (round trips spell them as named arguments)
TASK_ARGS = ("function", "dimensions", "range", "max_words", "source_language", "target_language",
             "response_format", "responseFormat", "returnType", "schema", "scores",
             "output_schema", "show_details", "aspects")
RANGES = ("-1..1", "0..1")


class QuailDuckDB(DuckDB):
    class Parser(DuckDBParser):
        FUNCTIONS = untyped_ai(DuckDBParser.FUNCTIONS)


def named_args(call: Call) -> tuple[Options, dict, tuple[tuple[str, str], ...]]:
    """Named arguments as options, AiOp fields and task arguments (NULL means not given); an
    unknown name is refused with the list of known ones."""
    known = {k.lower(): k for k in (*OPTION_KEYS, *GEN_KEYS, *FIELD_KEYS, "labels", *TASK_ARGS)}
    unknown = [k for k in call.kwargs if k not in known]
    if unknown:
        options = ", ".join((*OPTION_KEYS, *GEN_KEYS, *FIELD_KEYS, "labels"))
        raise ArgumentError(f"{call.name} has no option {shorten(unknown[0], 80)!r} (options: "
                            f"{options}; or a task argument)", call.sql(NAME), NAME)
    values = {known[k]: literal(v, f"option {k}", call.name, NAME)
              for k, v in call.kwargs.items() if k != "labels"}
    values = {k: v for k, v in values.items() if v is not None}
    gen = GenParams(**{k: values.pop(k) for k in GEN_KEYS if k in values})
    opts = Options(gen=gen, **{k: values.pop(k) for k in OPTION_KEYS if k in values})
    fields = {k: values.pop(k) for k in FIELD_KEYS if k in values}
    if "labels" in call.kwargs:
        fields["labels"] = labels(call.kwargs["labels"], call.name, NAME)
    site = Site(call.name, call.sql(NAME), NAME)
    if "range" in values:
        values["range"] = _range(site, values["range"])
    if "max_words" in values:
        values["max_words"] = number(site, "option max_words", values["max_words"], 0, 1e9,
                                     integer=True)
    task_args = tuple(sorted((k, v if isinstance(v, str) else json.dumps(v))
                             for k, v in values.items()))
    return opts, fields, task_args


def _range(site: Site, value: object) -> str:
    """A score's range option: 'LO..HI' with LO < HI (-1..1 and 0..1 for similarities, any
    scale for a score: sql/scales.py)."""
    try:
        lo, hi = scales.parse(value) if isinstance(value, str) else (0.0, 0.0)
    except ValueError:
        lo = hi = 0.0
    if not lo < hi:
        raise refuse(site, "option range", f"'LO..HI' with LO < HI (e.g. {', '.join(RANGES)})",
                     value)
    return scales.range_text(lo, hi)


def read_prompt(call: Call, args: list[exp.Expr]) -> Prompt:
    if not args:
        raise ArgumentError(f"{call.name} needs a prompt", call.sql(NAME), NAME)
    if len(args) == 1:
        return text_input(args[0], call.name, NAME)
    return text_input(exp.Anonymous(this="prompt", expressions=[a.copy() for a in args]),
                     call.name, NAME, origin=call.node)


def check_count(call: Call, n: int) -> None:
    if len(call.args) != n:
        raise ArgumentError(f"{call.name} takes {n} positional argument{'s' * (n != 1)}, got "
                            f"{len(call.args)}", call.sql(NAME), NAME)


def check_once(call: Call, fields: dict, name: str) -> None:
    """Refuse `name := ...` when the same value is also given positionally."""
    if name in fields:
        raise ArgumentError(f"{call.name}: {name} given twice (positionally and as "
                            f"{name} := ...)", call.sql(NAME), NAME)


def templated(op: str):
    def build(call: Call) -> Built:
        opts, fields, task_args = named_args(call)
        return make(op, read_prompt(call, call.args), call, options=opts, task_args=task_args,
                    **fields)
    return build


def unary(op: str, n: int):
    def build(call: Call) -> Built:
        check_count(call, n)
        opts, fields, task_args = named_args(call)
        prompt = read_prompt(call, call.args[:1]) if n == 1 else append(text_prompt(call.args[0]),
                                                                     call.args[1])
        return make(op, prompt, call, options=opts, task_args=task_args, **fields)
    return build


# vendor function name -> builder(Call) -> Built, filled by quail_engine.sql.functions
FUNCTIONS: dict = {}


def lookup(name: str):
    return FUNCTIONS.get(name)


def is_ai_name(name: str) -> bool:
    return name.startswith("AI_")


def unwrap(built: Built, node: exp.Expr) -> tuple[exp.Expr, str | None, Built]:
    return node, None, built

