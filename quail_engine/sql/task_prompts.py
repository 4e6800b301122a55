"""What the model reads for each task: one wording per task, kind and answer format.

A generated answer's user turn is its task's (or, for the kinds that are one task, its kind's)
template with `{text}` the rendered prompt (exec/tasks.py). A question over a shared document
(filters, classification, scores) asks its task's question below the document (exec/prompts.py).
The transpiler writes the same text when a target warehouse has no function for a task and the
task is spelled as a plain prompt (sql/emit: `task_prefix`), so the warehouse is asked what quail
asks. A template's other fields come from the call: `words`, `source`, `target` from its task
arguments, `kinds` from its labels, `fields` from its extraction fields, `instruction`.
"""

from __future__ import annotations

from quail_engine.sql.op_kinds import OpKind

# the tasks a call can name (`task := '...'` in the canonical dialect; vendors' task functions)
TASK_NAMES = ("summarize", "translate", "fix_grammar", "mask", "sentiment", "extract_answer")
# generated answers: task -> the user turn
TASKS = {
    "summarize": "Summarize the following text{words}:\n\n{text}",
    "translate": ("Translate the following text{source} to {target}. Reply with the translation "
                  "only:\n\n{text}"),
    "fix_grammar": "Correct the grammar of the following text. Reply with the text only:\n\n{text}",
    "mask": ("Rewrite the following text replacing every {kinds} with [MASKED]. Reply with the "
             "text only:\n\n{text}"),
    "extract_answer": "{text}\n\nAnswer briefly from the text above.",
}
# kinds whose every call is one task: kind -> the user turn (read before the call's task)
KIND_TASKS = {
    OpKind.AI_EXTRACT: ("{text}\n\nExtract from the text above a JSON object with these keys: "
                        "{fields}. Use null for a key the text does not answer. Reply with the "
                        "JSON object only."),
    OpKind.AI_AGGREGATE: "{instruction}\n\nTexts: {text}",
}
# a similarity reads its second text as the answer to this question about its first (the pair
# layout, exec/prompts.py): how much the first text raises the second's likelihood ranks
# related texts above unrelated ones, where the yes/no "do these mean the same?" was at chance
SIMILARITY_STEM = "Write a text that means the same as the text above."
# a mask is answered as an extraction of each kind's mention (response_schema: one nullable
# string per kind) and the text with each mention replaced (exec/tasks.masked): the embedded
# writer asked to rewrite the text dropped it ('Alice Smith emailed alice@example.com about the
# refund.' became 'MASKED.'); TASKS' rewrite wording is what a warehouse model is asked
# (sql/emit: task_prefix)
MASK_MENTIONS = KIND_TASKS[OpKind.AI_EXTRACT]
MASK_QUESTION = "Which {kind} is named?"
DEFAULT_AGGREGATE = "Summarize these texts."  # an aggregate's instruction when the SQL has none
DEFAULT_TARGET = "en"                         # a translation's target language when none is given
DEFAULT_MASKED = "personal information"       # what a mask replaces when no labels are given

# a prompt that is the document alone asks its task's question: (task, readout) -> question,
# the first of (task, readout), (task, None), (None, readout), (None, None) that is here
QUESTIONS = {
    ("sentiment", "score"): "Is the sentiment of the text above positive?",  # P(yes) is the score
    ("sentiment", None): "What is the sentiment of the text above?",
    (None, "label"): "Which label fits the text?",
    (None, None): "Is the statement above true?",
}
# a warehouse score function reads the number its model writes, not P(yes): a sentiment score
# transpiled to one (AI.SCORE, ai_query) carries the scale in the prompt
SCORE_RUBRICS = {
    "sentiment": "Rate the sentiment of the following text from -1 (negative) to 1 (positive):\n",
}
# generated answers under a response format: JSON schema type -> what the prompt says (the
# grammar enforces it; a model told it answers better than one only forced); SCHEMA_HINT for
# any other schema
FORMAT_HINTS = {
    "integer": "\n\nReply with a whole number only.",
    "number": "\n\nReply with a number only.",
    "boolean": "\n\nReply with true or false only.",
}
SCHEMA_HINT = "\n\nReply with JSON matching this schema only: {schema}"
if {*TASKS, *(t for t, _ in QUESTIONS if t)} != set(TASK_NAMES):
    raise ImportError("every task in TASK_NAMES needs a wording in TASKS or QUESTIONS")


def task_template(op) -> str | None:
    """The user-turn template of `op` (an ir.AiOp): its kind's, else its task's, else None."""
    if op.task == "mask":
        return MASK_MENTIONS
    return KIND_TASKS.get(op.op) or TASKS.get(op.task)


def mask_kinds(op) -> tuple[str, ...]:
    """What a mask replaces: its labels, else DEFAULT_MASKED."""
    return tuple(lb.name for lb in op.labels or ()) or (DEFAULT_MASKED,)


def fill(template: str, op, text: str, field_names: tuple[str, ...] = ()) -> str:
    """`template` with `{text}` the rendered prompt and its other fields from `op`'s call;
    `field_names`: an extraction's fields when its labels name none (its schema's)."""
    args = dict(op.task_args)
    limit = args.get("max_words")
    named = [(lb.name, lb.description or lb.name) for lb in op.labels or ()] or [
        (name, name) for name in field_names]
    if op.task == "mask":
        named = [(kind, MASK_QUESTION.format(kind=kind)) for kind in mask_kinds(op)]
    return template.format(
        text=text,
        words=f" in at most {limit} words" if limit and limit != "0" else "",
        source=f" from {args['source_language']}" if args.get("source_language") else "",
        target=args.get("target_language", DEFAULT_TARGET),
        kinds=", ".join(mask_kinds(op)),
        fields="; ".join(f'"{name}": {question}' for name, question in named),
        instruction=op.instruction or DEFAULT_AGGREGATE)


def question(task: str | None, readout: str) -> str:
    """The question a prompt that is the document alone asks (`readout`: its kind's)."""
    for key in ((task, readout), (task, None), (None, readout)):
        if key in QUESTIONS:
            return QUESTIONS[key]
    return QUESTIONS[(None, None)]
