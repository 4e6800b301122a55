"""Generative task prompts and answer shaping for the operators that are not a yes/no or label
readout: summarize, translate, fix_grammar, mask, extract, aggregate, similarity, token counts.

The SQL front end lowers e.g. `ai_summarize(x, 10)` to template "{0}" with task="summarize" and
task_args max_words=10; this module turns that into the instruction the model sees.
"""

from __future__ import annotations

import json
import re

from quail_engine.errors import UnsupportedError

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def _args(op) -> dict[str, str]:
    return dict(op.task_args)


def task_prompt(op, rendered: str) -> str:
    """The user turn for a generative operator given its rendered template."""
    args = _args(op)
    task = op.task
    if op.op == "ai_extract":
        fields = "; ".join(f'"{lb.name}": {lb.description or lb.name}' for lb in op.labels or ())
        return (f"{rendered}\n\nExtract from the text above a JSON object with these keys: "
                f"{fields}. Reply with the JSON object only.")
    if op.op == "ai_aggregate":
        return f"{op.instruction or 'Summarize these texts.'}\n\nTexts: {rendered}"
    if op.op == "ai_similarity":
        parts = rendered.split("\n", 1)
        return (f"Text 1: {parts[0]}\nText 2: {parts[1] if len(parts) > 1 else ''}\n"
                "Do these two texts mean the same thing? Answer yes or no.")
    if task == "summarize":
        limit = args.get("max_words")
        words = f" in at most {limit} words" if limit and limit != "0" else ""
        return f"Summarize the following text{words}:\n\n{rendered}"
    if task == "translate":
        src = args.get("source_language")
        source = f" from {src}" if src else ""
        return (f"Translate the following text{source} to {args.get('target_language', 'en')}. "
                f"Reply with the translation only:\n\n{rendered}")
    if task == "fix_grammar":
        return f"Correct the grammar of the following text. Reply with the text only:\n\n{rendered}"
    if task == "mask":
        kinds = ", ".join(lb.name for lb in op.labels or ()) or "personal information"
        return (f"Rewrite the following text replacing every {kinds} with [MASKED]. Reply with "
                f"the text only:\n\n{rendered}")
    if task in ("extract_answer", "qa"):
        return f"{rendered}\n\nAnswer briefly from the text above."
    if op.instruction:
        return f"{op.instruction}\n\n{rendered}"
    return rendered


def shape_text(op, text: str) -> str:
    """Post-process a decoded answer into the operator's SQL value (JSON for extract)."""
    text = text.strip()
    if op.op != "ai_extract":
        return text
    match = _JSON_OBJECT.search(text)
    if match:
        try:
            return json.dumps(json.loads(match.group(0)))
        except ValueError:
            pass
    return json.dumps({lb.name: None for lb in op.labels or ()})


def check_supported(op) -> None:
    if op.op == "ai_embed":
        raise UnsupportedError(f"{op.op} needs an embedding model; the local engine has none",
                               op.origin or None)
