"""Snowflake's spellings of ai_generate: AI_COMPLETE, COMPLETE / TRY_COMPLETE (a conversation),
AI_TRANSLATE / TRANSLATE and SUMMARIZE (https://docs.snowflake.com/en/sql-reference/functions/
ai_complete), read and written."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

from sqlglot import exp

from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call, Signature, bind, fragment
from quail_engine.sql.dialects import snowflake as sf
from quail_engine.sql.dialects.common import append, as_file, joined, text_input
from quail_engine.sql.emit import snowflake as sf_sql
from quail_engine.sql.emit.common import lit, refuse, warn
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import AiOp, OpKind, Options
from quail_engine.sql.literals import flag, gen_params, gen_spelling, literal, options, string
from quail_engine.sql.prompt import Prompt
from quail_engine.sql.response_schema import snowflake_format, snowflake_format_node
from quail_engine.sql.shapes import SHOW_DETAILS, shows_details
from quail_engine.sql.validate import Site, known_keys, language, number, text

# the documented keys of Snowflake's options object (a misspelled key is refused, not ignored)
SNOWFLAKE_KEYS = ("temperature", "top_p", "max_tokens", "guardrails")
SNOWFLAKE_MAX_TOKENS = 8192  # https://docs.snowflake.com/en/sql-reference/functions/ai_complete
# AI_TRANSLATE's language codes ('' = detect the source), from its usage notes:
# https://docs.snowflake.com/en/sql-reference/functions/ai_translate
SNOWFLAKE_LANGUAGES = ("", "ar", "zh", "hr", "cs", "nl", "en", "fi", "fr", "de", "el", "he", "hi",
                       "it", "ja", "ko", "no", "pl", "pt", "ro", "ru", "es", "sv", "tr")
SNOWFLAKE_ROLES = ("system", "user", "assistant")


def build_snowflake(call: Call, legacy: bool = False, try_: bool = False) -> Built:
    names = ("model", "prompt", "model_parameters", "response_format", "show_details")
    a = bind(call, Signature(names, 2, ("file", "options")), sf.NAME)
    params = a.get("model_parameters", a.get("options"))
    if "model_parameters" in a and not isinstance(params, exp.Struct | exp.ParseJSON):  # FILE
        a["file"], params = a.pop("model_parameters"), None
    if isinstance(a["prompt"], exp.Array) and not legacy:
        raise ArgumentError(f"{call.name} takes one prompt string or PROMPT(...); a "
                            "conversation history is SNOWFLAKE.CORTEX.COMPLETE's form",
                            call.sql(sf.NAME), sf.NAME)
    opts = options(params, "model_parameters", call.name, sf.NAME)
    site = Site(call.name, call.sql(sf.NAME), sf.NAME)
    known_keys(site, "the options" if legacy else "model_parameters", opts,
               (*SNOWFLAKE_KEYS, "response_format") if legacy else SNOWFLAKE_KEYS)
    prompt = (_snowflake_history(a["prompt"], call) if isinstance(a["prompt"], exp.Array)
              else text_input(a["prompt"], call.name, sf.NAME))
    file = a.get("file")
    if file is not None:
        prompt = append(prompt, file)
    task_args = []
    fmt = a.get("response_format")
    read_schema = _option_format(params, opts) if legacy else None
    if fmt is not None:
        spelled = fmt.sql(dialect=sf.NAME)
        task_args.append(("response_format", f"TYPE {spelled}" if isinstance(fmt, exp.DataType)
                          else spelled))
        read_schema = partial(snowflake_format_node, fmt)
    if legacy and params is not None or flag(a.get("show_details"), "show_details", call):
        task_args.append(SHOW_DETAILS)
    on_error = "fail" if legacy and not try_ else "null"
    gen = gen_params(opts)
    call.spelled.update(gen_spelling(opts))  # (messages: the user's names)
    if gen.max_tokens is not None:  # "max_tokens (default 4096, max 8192)"
        number(site, f"option {call.spelled['max_tokens']}", gen.max_tokens, 1,
               SNOWFLAKE_MAX_TOKENS, integer=True)
    rest = {k: v for k, v in opts.items() if k.lower() not in
            ("temperature", "top_p", "max_tokens", "stop")}
    built = make(OpKind.AI_GENERATE, prompt, call, task_args=tuple(task_args),
                 options=Options(model=string(a["model"], "the model", call.name, sf.NAME),
                                 gen=gen, on_error=on_error, vendor=vendor_items(rest)),
                 read_schema=read_schema)
    return built if file is None else as_file(built, file)


def _option_format(params: exp.Expr | None, opts: dict) -> Callable[[], dict] | None:
    """The schema reader of COMPLETE's `response_format` option, read as AI_COMPLETE's
    argument is, so the answer is decoded under it
    (https://docs.snowflake.com/en/user-guide/snowflake-cortex/complete-structured-outputs).
    The option itself stays a vendor option: transpile writes it from there (emit/formats.py).
    The option's own tree where the options are an object constant (messages quote it as
    written), its value where they are JSON text."""
    key = next((k for k in opts if str(k).lower() == "response_format"), None)
    if key is None:
        return None
    node = next((e.expression for e in getattr(params, "expressions", ())
                 if isinstance(e, exp.PropertyEQ) and e.this.name.lower() == "response_format"),
                None)
    if node is not None:
        return partial(snowflake_format_node, node)
    return partial(snowflake_format, json.dumps(opts[key]))


def _snowflake_history(node: exp.Array, call: Call) -> Prompt:
    """COMPLETE's conversation `[{'role': ..., 'content': ...}, ...]` as one prompt: the
    earlier turns as `role: content` lines, then the last message's content, which must be the
    user's (https://docs.snowflake.com/en/sql-reference/functions/complete-snowflake-cortex).
    Contents may read columns; roles are literals."""
    site = Site(call.name, call.sql(sf.NAME), sf.NAME)
    turns = []
    for message in node.expressions:
        fields = {e.this.name.lower(): e.expression for e in message.expressions
                  if isinstance(e, exp.PropertyEQ)} if isinstance(message, exp.Struct) else {}
        if set(fields) != {"role", "content"} or len(fields) != len(message.expressions):
            raise ArgumentError(f"{call.name}: each message of the conversation must be "
                                "{'role': ..., 'content': ...}", fragment(message, sf.NAME),
                                sf.NAME)
        role = text(site, "a message role", literal(fields["role"], "the role", call.name, sf.NAME),
                    SNOWFLAKE_ROLES)
        turns.append((role, text_input(fields["content"], call.name, sf.NAME)))
    if not turns or turns[-1][0] != "user":
        raise ArgumentError(f"{call.name}: the conversation must end with a user message",
                            site.sql, sf.NAME)
    lines = [Prompt(f"{role}: {p.template}", p.exprs) for role, p in turns[:-1]]
    return joined([*lines, turns[-1][1]])


def build_snowflake_translate(call: Call) -> Built:
    names = ("text", "source_language", "target_language", "return_error_details")
    a = bind(call, Signature(names, 3), sf.NAME)
    on_error, shape = sf.read_on_error(a, call)
    site = Site(call.name, call.sql(sf.NAME), sf.NAME)
    langs = tuple((k, language(site, k, string(a[k], k, call.name, sf.NAME),
                               SNOWFLAKE_LANGUAGES if k == "source_language"
                               else SNOWFLAKE_LANGUAGES[1:]))
                  for k in names[1:3])
    return make(OpKind.AI_GENERATE, text_input(a["text"], call.name, sf.NAME), call, shape=shape,
                task="translate", task_args=langs, options=Options(on_error=on_error))


def build_snowflake_summarize(call: Call) -> Built:
    a = bind(call, Signature(("text",), 1), sf.NAME)
    return make(OpKind.AI_GENERATE, text_input(a["text"], call.name, sf.NAME), call,
                task="summarize")

def _snowflake_params(op: AiOp) -> str:
    g = op.options.gen
    values = {k: v for k, v in (("temperature", g.temperature), ("top_p", g.top_p),
                                ("max_tokens", g.max_tokens)) if v is not None}
    return f", {sf_sql.object_text(values)}" if values else ""


def emit_snowflake(op: AiOp, args: list[str]) -> str:
    name, prompt = sf_sql.NAME, sf_sql.prompt_sql(op, args)
    a = dict(op.task_args)
    if op.task == "translate":
        sf_sql.no_model("AI_TRANSLATE", op)
        return (f"AI_TRANSLATE({prompt}, {lit(a.get('source_language', ''), name)}, "
                f"{lit(a.get('target_language', 'en'), name)})")
    if op.task == "summarize":
        if a.get("max_words"):
            warn("SUMMARIZE", name, "Snowflake's SUMMARIZE has no word limit; max_words dropped")
        return f"SNOWFLAKE.CORTEX.SUMMARIZE({prompt})"
    if op.task is not None:
        raise refuse(f"ai_{op.task}", name, "Cortex has no such task function", op)
    model = op.options.model
    if model is None:
        model = sf_sql.DEFAULT_MODEL
        warn("AI_COMPLETE", name, f"AI_COMPLETE needs a model; using {sf_sql.DEFAULT_MODEL!r}")
    params = _snowflake_params(op)
    if shows_details(op):  # named arguments: positional ones cannot skip to show_details
        named = [f"model => {lit(model, name)}", f"prompt => {prompt}"]
        if params:
            named.append(f"model_parameters => {params[2:]}")
        if "response_format" in a:
            named.append(f"response_format => {a['response_format']}")
        return f"AI_COMPLETE({', '.join(named)}, show_details => TRUE)"
    if "response_format" in a:
        params = f"{params or ', {}'}, {a['response_format']}"
    sql = f"AI_COMPLETE({lit(model, name)}, {prompt}{params})"
    if op.output_type in ("BIGINT", "DOUBLE"):
        warn("AI_COMPLETE", name, f"typed generation becomes a cast of free text to "
             f"{op.output_type}")
        return f"TRY_CAST({sql} AS {'INT' if op.output_type == 'BIGINT' else 'FLOAT'})"
    return sql
