"""Snowflake Cortex AISQL -> IR. Docs: https://docs.snowflake.com/en/user-guide/snowflake-cortex/aisql"""

from __future__ import annotations

import dataclasses
from functools import partial

from sqlglot import exp
from sqlglot.dialects.snowflake import Snowflake
from sqlglot.generators.snowflake import SnowflakeGenerator
from sqlglot.parsers.snowflake import SnowflakeParser

from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind, fragment
from quail_engine.sql.dialects.common import (
    append,
    as_file,
    climb_json,
    joined,
    text_input,
    untyped_ai,
)
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import OpKind, Options
from quail_engine.sql.literals import flag, gen_params, literal, options, string
from quail_engine.sql.prompt import Prompt
from quail_engine.sql.response_schema import snowflake_format_node
from quail_engine.sql.shapes import SHOW_DETAILS
from quail_engine.sql.validate import (
    Site,
    known_keys,
    language,
    number,
    text,
)

NAME = "snowflake"
CORTEX = "SNOWFLAKE.CORTEX."


class QuailSnowflake(Snowflake):
    class Parser(SnowflakeParser):
        FUNCTIONS = untyped_ai(SnowflakeParser.FUNCTIONS)

        def _parse_type(self, *args, **kwargs):
            """`TYPE OBJECT(a STRING, ...)`: AI_COMPLETE's response_format as a SQL type
            (https://docs.snowflake.com/en/sql-reference/functions/ai_complete-single-string)."""
            if (self._curr and self._curr.text.upper() == "TYPE" and self._next
                    and self._next.text.upper() in ("OBJECT", "ARRAY", "MAP")):
                self._advance()
                return self._parse_types()
            return super()._parse_type(*args, **kwargs)

        def _parse_lateral(self):
            """`LATERAL FLATTEN(input => AI_CLASSIFY(...):labels) f`: the labels unnested, one
            row each, `f.value` the label (https://docs.snowflake.com/en/sql-reference/functions/
            flatten); sqlglot's FLATTEN over DuckDB is no SQL DuckDB reads."""
            lateral = super()._parse_lateral()
            return _flattened_labels(lateral) or lateral

    class Generator(SnowflakeGenerator):
        def datatype_sql(self, expression: exp.DataType) -> str:
            """A type passed as an argument keeps its `TYPE` keyword, so it reads back."""
            text = super().datatype_sql(expression)
            if isinstance(expression.parent, exp.Kwarg | exp.Anonymous):
                return f"TYPE {text}"
            return text


def _flattened_labels(lateral: exp.Expr | None) -> exp.Unnest | None:
    """`lateral` as an UNNEST of an AI call's `:labels` array with the one FLATTEN column it
    has, `value` (None: any other FLATTEN, left as sqlglot reads it)."""
    explode = lateral.this if isinstance(lateral, exp.Lateral) else None
    if not isinstance(explode, exp.Explode):
        return None
    arg = explode.this
    if isinstance(arg, exp.Kwarg):
        if arg.this.name.lower() != "input":
            return None
        arg = arg.expression
    call = arg.this if isinstance(arg, exp.JSONExtract) else None
    if not (isinstance(call, exp.Anonymous) and is_ai_name(call.name.upper())
            and climb_json(call) == (arg, "labels", False)):
        return None
    alias = lateral.args.get("alias")
    name = alias.this if alias is not None and alias.this else exp.to_identifier("_flattened")
    return exp.Unnest(expressions=[arg],
                      alias=exp.TableAlias(this=name, columns=[exp.to_identifier("value")]))


def read_on_error(args: dict, call: Call, default: str = "null") -> tuple[str, str | None]:
    if flag(args.get("return_error_details"), "return_error_details", call):
        return "details", "value_error_object"
    return default, None


def compose(outer: str | None, inner: str | None) -> str | None:
    return "+".join(s for s in (outer, inner) if s) or None


# the documented keys of each options object (a misspelled key is refused, not ignored)
COMPLETE_KEYS = ("temperature", "top_p", "max_tokens", "guardrails")
MAX_TOKENS = 8192  # https://docs.snowflake.com/en/sql-reference/functions/ai_complete
# AI_TRANSLATE's language codes ('' = detect the source), from its usage notes:
# https://docs.snowflake.com/en/sql-reference/functions/ai_translate
LANGUAGES = ("", "ar", "zh", "hr", "cs", "nl", "en", "fi", "fr", "de", "el", "he", "hi", "it",
             "ja", "ko", "no", "pl", "pt", "ro", "ru", "es", "sv", "tr")


def _build_complete(call: Call, legacy: bool = False, try_: bool = False) -> Built:
    names = ("model", "prompt", "model_parameters", "response_format", "show_details")
    a = bind(call, Signature(names, 2, ("file", "options")), NAME)
    params = a.get("model_parameters", a.get("options"))
    if "model_parameters" in a and not isinstance(params, exp.Struct | exp.ParseJSON):  # FILE
        a["file"], params = a.pop("model_parameters"), None
    if isinstance(a["prompt"], exp.Array) and not legacy:
        raise ArgumentError(f"{call.name} takes one prompt string or PROMPT(...); a "
                            "conversation history is SNOWFLAKE.CORTEX.COMPLETE's form",
                            call.sql(NAME), NAME)
    opts = options(params, "model_parameters", call.name, NAME)
    site = Site(call.name, call.sql(NAME), NAME)
    known_keys(site, "the options" if legacy else "model_parameters", opts,
               (*COMPLETE_KEYS, "response_format") if legacy else COMPLETE_KEYS)
    prompt = (_history(a["prompt"], call) if isinstance(a["prompt"], exp.Array)
              else text_input(a["prompt"], call.name, NAME))
    file = a.get("file")
    if file is not None:
        prompt = append(prompt, file)
    task_args = []
    fmt = a.get("response_format")
    if fmt is not None:
        spelled = fmt.sql(dialect=NAME)
        task_args.append(("response_format", f"TYPE {spelled}" if isinstance(fmt, exp.DataType)
                          else spelled))
    if legacy and params is not None or flag(a.get("show_details"), "show_details", call):
        task_args.append(SHOW_DETAILS)
    on_error = "fail" if legacy and not try_ else "null"
    gen = gen_params(opts)
    if gen.max_tokens is not None:  # "max_tokens (default 4096, max 8192)"
        number(site, "option max_tokens", gen.max_tokens, 1, MAX_TOKENS, integer=True)
    rest = {k: v for k, v in opts.items() if k.lower() not in
            ("temperature", "top_p", "max_tokens", "stop")}
    built = make(OpKind.AI_GENERATE, prompt, call, task_args=tuple(task_args),
                 options=Options(model=string(a["model"], "the model", call.name, NAME),
                                 gen=gen, on_error=on_error, vendor=vendor_items(rest)),
                 read_schema=None if fmt is None else partial(snowflake_format_node, fmt))
    return built if file is None else as_file(built, file)


ROLES = ("system", "user", "assistant")


def _history(node: exp.Array, call: Call) -> Prompt:
    """COMPLETE's conversation `[{'role': ..., 'content': ...}, ...]` as one prompt: the
    earlier turns as `role: content` lines, then the last message's content, which must be the
    user's (https://docs.snowflake.com/en/sql-reference/functions/complete-snowflake-cortex).
    Contents may read columns; roles are literals."""
    site = Site(call.name, call.sql(NAME), NAME)
    turns = []
    for message in node.expressions:
        fields = {e.this.name.lower(): e.expression for e in message.expressions
                  if isinstance(e, exp.PropertyEQ)} if isinstance(message, exp.Struct) else {}
        if set(fields) != {"role", "content"} or len(fields) != len(message.expressions):
            raise ArgumentError(f"{call.name}: each message of the conversation must be "
                                "{'role': ..., 'content': ...}", fragment(message, NAME), NAME)
        role = text(site, "a message role", literal(fields["role"], "the role", call.name, NAME),
                    ROLES)
        turns.append((role, text_input(fields["content"], call.name, NAME)))
    if not turns or turns[-1][0] != "user":
        raise ArgumentError(f"{call.name}: the conversation must end with a user message",
                            site.sql, NAME)
    lines = [Prompt(f"{role}: {p.template}", p.exprs) for role, p in turns[:-1]]
    return joined([*lines, turns[-1][1]])


def _build_translate(call: Call) -> Built:
    names = ("text", "source_language", "target_language", "return_error_details")
    a = bind(call, Signature(names, 3), NAME)
    on_error, shape = read_on_error(a, call)
    site = Site(call.name, call.sql(NAME), NAME)
    langs = tuple((k, language(site, k, string(a[k], k, call.name, NAME),
                               LANGUAGES if k == "source_language" else LANGUAGES[1:]))
                  for k in names[1:3])
    return make(OpKind.AI_GENERATE, text_input(a["text"], call.name, NAME), call, shape=shape,
                task="translate", task_args=langs, options=Options(on_error=on_error))


def _build_summarize(call: Call) -> Built:
    a = bind(call, Signature(("text",), 1), NAME)
    return make(OpKind.AI_GENERATE, text_input(a["text"], call.name, NAME), call, task="summarize")


FUNCTIONS = {
    "AI_COMPLETE": _build_complete,
    "AI_TRANSLATE": _build_translate,
    CORTEX + "COMPLETE": lambda call: _build_complete(call, legacy=True),
    CORTEX + "TRY_COMPLETE": lambda call: _build_complete(call, legacy=True, try_=True),
    CORTEX + "SUMMARIZE": _build_summarize,
    CORTEX + "TRANSLATE": _build_translate,
}

WRAPPERS = {
}


def lookup(name: str):
    """The builder for a function name, or None. `SNOWFLAKE.CORTEX.AI_X` means `AI_X`."""
    if name.startswith(CORTEX) and name[len(CORTEX):].startswith("AI_"):
        name = name[len(CORTEX):]
    return FUNCTIONS.get(name)


def is_ai_name(name: str) -> bool:
    return name.startswith(("AI_", CORTEX))


def unwrap(built: Built, node: exp.Expr) -> tuple[exp.Expr, str | None, Built]:
    """Strip `:labels[0]::STRING`, `:label`, `:response`, ... around a call."""
    table = WRAPPERS.get(built.shape or "")
    climbed = climb_json(node) if table else None
    if not climbed or climbed[1] not in table:
        return node, None, built
    outer, path, has_cast = climbed
    w = table[path]
    text = f"{NAME}:{path.replace('.', ':')}" + ("::STRING" if has_cast else "")
    return outer, text, dataclasses.replace(built, op=dataclasses.replace(built.op, wrapper=text),
                                            shape=w.shape)

