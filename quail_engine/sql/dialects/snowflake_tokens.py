"""Snowflake's AI_COUNT_TOKENS -> IR: the text the named function would read, as one template.
Docs: https://docs.snowflake.com/en/sql-reference/functions/ai_count_tokens"""

from __future__ import annotations

import json

from sqlglot import exp

from quail_engine.sql.build import Built, make, vendor_items
from quail_engine.sql.call import Call
from quail_engine.sql.dialects.common import append, text_input, text_prompt
from quail_engine.sql.errors import ArgumentError
from quail_engine.sql.ir import Label, OpKind, Options
from quail_engine.sql.literals import labels, options, string
from quail_engine.sql.prompt import Prompt
from quail_engine.sql.validate import Site, show

NAME = "snowflake"

# AI_COUNT_TOKENS's function names (lower case, `ai_` first: "The name of the function must
# begin with 'ai_' and use only lowercase letters") -> the arguments after the name, besides an
# optional trailing options object. https://docs.snowflake.com/en/sql-reference/functions/ai_count_tokens
OBJECTS = (exp.Struct, exp.Map, exp.VarMap, exp.ParseJSON)
COUNTED = {
    "ai_complete": ("model", "input"), "ai_embed": ("model", "input"),
    "ai_classify": ("input", "categories"), "ai_translate": ("input", "source", "target"),
    "ai_similarity": ("input", "input2"), "ai_filter": ("input",), "ai_agg": ("input",),
    "ai_summarize_agg": ("input",), "ai_sentiment": ("input",), "ai_extract": ("input",),
}


def _count_function(call: Call) -> str:
    site = Site(call.name, call.sql(NAME), NAME)
    fn = string(call.args[0], "the function name", call.name, NAME)
    if fn in COUNTED:
        return fn
    if fn.lower() in COUNTED:
        why = f"names are written in lower case: {fn.lower()!r}"
    elif f"ai_{fn.lower()}" in COUNTED:
        why = f"names begin with 'ai_': {'ai_' + fn.lower()!r}"
    else:
        why = f"expected one of {', '.join(COUNTED)}"
    raise ArgumentError(f"{call.name}: unknown function name {show(fn)}; {why}", site.sql, NAME)


def build_count_tokens(call: Call) -> Built:
    """The text the named function would read, as one template: the input, then one line per
    further counted argument (translate's languages, similarity's second text, classify's
    categories and config), so the count covers them all."""
    if call.kwargs or not call.args:
        raise ArgumentError(f"{call.name} takes positional arguments: a function name, then "
                            "its inputs", call.sql(NAME), NAME)
    fn = _count_function(call)
    params = COUNTED[fn]
    args = call.args[1:]
    opts_node = args[len(params)] if len(args) == len(params) + 1 else None
    is_object = isinstance(opts_node, OBJECTS) and fn != "ai_translate"
    if len(args) != len(params) + (opts_node is not None and is_object):
        raise ArgumentError(f"{call.name}({fn!r}, ...) takes {', '.join(params)}"
                            f"{'' if fn == 'ai_translate' else ' [, options]'}",
                            call.sql(NAME), NAME)
    given = dict(zip(params, args))
    config = options(opts_node if is_object else None, "the options", call.name, NAME)
    model = string(given["model"], "the model", call.name, NAME) if "model" in given else \
        config.pop("model", None) if fn == "ai_similarity" else None
    prompt = (text_prompt(given["input"]) if fn == "ai_similarity"
              else text_input(given["input"], call.name, NAME))
    for extra in ("input2", "source", "target"):
        if extra in given:
            prompt = append(prompt, given[extra])
    found = None
    if "categories" in given:
        found = labels(given["categories"], call.name, NAME, min_count=2)
        prompt = Prompt(f"{prompt.template}\n{category_text(found)}", prompt.exprs)
    if config and fn == "ai_classify":
        prompt = Prompt(f"{prompt.template}\n{json.dumps(config, sort_keys=True)}", prompt.exprs)
    return make(OpKind.AI_COUNT_TOKENS, prompt, call, labels=found,
                task_args=(("function", fn),),
                options=Options(model=model, vendor=vendor_items(config)))


def category_text(found: tuple[Label, ...]) -> str:
    """Categories as AI_COUNT_TOKENS counts them: one JSON line (names, or name: description)."""
    if any(lb.description for lb in found):
        return json.dumps({lb.name: lb.description or "" for lb in found})
    return json.dumps([lb.name for lb in found])
