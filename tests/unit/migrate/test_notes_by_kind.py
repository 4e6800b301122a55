"""`quail migrate`'s note on each operator kind is declared beside the kind's vendor spellings
(sql/functions/<kind>.py `NOTES`, `REFUSAL_NOTE`), so adding a kind never edits
migrate/differences.py (issue 41 item 3). The texts are the report's and docs/migrate.md's."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from quail_engine.exec.facade import DEFAULT_MAX_TOKENS
from quail_engine.migrate import differences
from quail_engine.migrate.differences import assess
from quail_engine.sql import functions
from quail_engine.sql.ir import AiOp, GenParams, Options
from quail_engine.sql.op_kinds import OpKind

GREEDY = "greedy decoding, at most {} new tokens (the profile's max_new_tokens caps it)"
CASES = [
    (AiOp(OpKind.AI_FILTER, "{0}"), ("unchanged", "")),
    (AiOp(OpKind.AI_CLASSIFY, "{0}"), ("unchanged", "")),
    (AiOp(OpKind.AI_CLASSIFY, "{0}", multi=True),
     ("difference", "multi-label: one decision per label over the same document (on the default "
      "model a likelihood threshold chosen on labelled data), not the vendor's model")),
    (AiOp(OpKind.AI_SCORE, "{0}", task="sentiment"),
     ("difference", "2 * P(the text is positive) - 1 in -1..1, from one yes/no prefill, not "
      "Snowflake's sentiment model")),
    (AiOp(OpKind.AI_SCORE, "{0}", task_args=(("range", "1..10"),)),
     ("difference", "the probability of a yes answer placed on the 1-10 scale the prompt "
      "states, not a number the model writes")),
    (AiOp(OpKind.AI_SCORE, "{0}"),
     ("difference", "the probability of a yes answer in 0..1 (the prompt states no scale), not "
      "a number the model writes")),
    (AiOp(OpKind.AI_GENERATE, "{0}"), ("difference", GREEDY.format(DEFAULT_MAX_TOKENS))),
    (AiOp(OpKind.AI_GENERATE, "{0}", options=Options(model="m", gen=GenParams(7, 0.5))),
     ("difference", f"names the model 'm': the profile's model answers instead; "
      f"{GREEDY.format(7)}; temperature and top_p are ignored")),
    (AiOp(OpKind.AI_EXTRACT, "{0}"),
     ("difference", f"{GREEDY.format(DEFAULT_MAX_TOKENS)}; the JSON is decoded under the "
      "fields' schema; an answer not complete within its tokens is NULL")),
    (AiOp(OpKind.AI_AGGREGATE, "{0}"),
     ("difference", "a group past the model's context is summarized in chunks, then from the "
      "chunks' answers (map-reduce with the call's own instruction)")),
    (AiOp(OpKind.AI_COUNT_TOKENS, "{0}"),
     ("difference", "counts the tokens of the profile's model, not the warehouse model's")),
    (AiOp(OpKind.AI_EMBED, "{0}"),
     ("refused", "Quail ships no embedding model: ai_embed is refused when the query is read; "
      "no rewrite (compute embeddings outside the model)")),
]


@pytest.mark.parametrize(("op", "expected"), CASES, ids=[f"{c[0].op}-{i}" for i, c in
                                                         enumerate(CASES)])
def test_each_kinds_documented_note(op, expected):
    assert assess(op, "F") == expected


def test_differences_names_no_operator_kind():
    """A kind named in migrate/differences.py (an `if kind == OpKind...` branch, a table keyed
    by kind, a kind's value as text) would make a new kind edit it again."""
    tree = ast.parse(Path(differences.__file__).read_text())
    names = {m.name for m in OpKind}
    values = {m.value for m in OpKind}
    named = [ast.unparse(n) for n in ast.walk(tree)
             if (isinstance(n, ast.Name) and n.id == "OpKind")
             or (isinstance(n, ast.Attribute) and n.attr in names)
             or (isinstance(n, ast.Constant) and n.value in values)]
    assert named == []


@pytest.mark.parametrize("kind", list(OpKind))
def test_a_kinds_notes_are_its_functions_modules(kind):
    (owner,) = [m for m in functions.MODULES.values() if kind in m.KINDS]
    assert functions.NOTES.get(kind) is getattr(owner, "NOTES", None)
    assert functions.REFUSAL_NOTES.get(kind) == getattr(owner, "REFUSAL_NOTE", None)


def test_a_registered_note_reaches_the_report_with_the_default_limit(monkeypatch):
    monkeypatch.setitem(functions.NOTES, OpKind.AI_FILTER, lambda op, limit: [f"new {limit}"])
    assert assess(AiOp(OpKind.AI_FILTER, "{0}"), "AI_FILTER") == \
        ("difference", f"new {DEFAULT_MAX_TOKENS}")


def test_a_kinds_notes_registered_twice_are_refused():
    clash = types.ModuleType("quail_engine.sql.functions.clash")
    clash.KINDS, clash.PARSE, clash.EMIT = (OpKind.AI_SCORE,), {}, {}
    clash.NOTES = lambda op, limit: ["other"]
    with pytest.raises(ImportError, match="notes ai_score is registered twice"):
        functions._merge(clash)
    assert functions.NOTES[OpKind.AI_SCORE] is functions.MODULES["score"].NOTES
