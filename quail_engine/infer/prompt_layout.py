"""The prompt layouts the executor asks in (quail_engine/exec/prompts.py builds its requests from
these pieces; quail_testing/ask.py calls an engine in them for the accuracy benches and engine
tests).

One user turn per prompt, document first, question last:

    Text:\n{document}\n\nQuestion: {question}\nAnswer yes or no.

Document first lets one document's KV serve every question asked about it (joins: the anchor
text is the shared prefix), and measured better than question first for the
small default model on a development set (bench/data/dev_reviews.jsonl; see bench/accuracy.py).
Boolean and label readouts are calibrated by default: the scores the same prompt gives for the
content-free document "N/A" are subtracted.

Two-argument questions (does this review mention that topic?) are not asked as yes/no: the small
embedded models' yes/no answer carries no information about the pair (no better than chance
with every calibration tried: bench/pair_accuracy.py). The partner is instead the answer the
model is made to read after the question stem, and the readout is how much the document raises
its likelihood over the content-free document (`SpanReadout`), in nats, against
`PAIR_THRESHOLD`:

    Text:\n{document}\n\nQuestion: {stem}\nAnswer: {partner}
"""

from __future__ import annotations

from collections.abc import Sequence

from quail_engine.infer.api import SpanReadout

CONTENT_FREE = "N/A"
BOOLEAN_HINT = "Answer yes or no."
# nats of pointwise mutual information a partner needs; chosen on the dev split of
# tests/data/pairs_labelled.jsonl (accuracy is flat around it there), reported on its test split
# (bench/pair_accuracy.py)
PAIR_THRESHOLD = 3.5


def document_text(document: str) -> str:
    """The shareable prefix text of every shared layout."""
    return f"Text:\n{document}\n\n"


def pair_cue(stem: str) -> str:
    """The suffix text before a two-argument question's partner."""
    return f"Question: {stem}\nAnswer:"


def pair_readout(cue: str) -> SpanReadout:
    """The readout of a suffix `cue + " " + partner`: the partner's PMI with the document."""
    return SpanReadout(cue, PAIR_THRESHOLD, document_text(CONTENT_FREE))


def label_hint(labels: Sequence[str]) -> str:
    return "Answer with one word: " + " or ".join(labels) + "."
