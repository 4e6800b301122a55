"""How the engine treats particular models: the layout two-argument questions take, the
repetition penalty of generated text, and what the user is told about the question shapes the
embedded models answer poorly (`WEAK_ON_DEFAULT`; exec/prompts.py decides a question's shape
and warns)."""

from __future__ import annotations

from quail_engine.infer.embedded import DEFAULT_MODEL, EMBEDDED_REPETITION_PENALTY, is_embedded

# shapes the embedded default model answers poorly whatever the layout (bench/pair_accuracy.py,
# examples/README.md): shape -> what the user is told once
WEAK_ON_DEFAULT = {
    "yes/no filter on one document": (
        "the default model's yes/no answer tracks whether the text reads positive, not the "
        "question asked ('Is this review negative?' was right on 15% of labelled reviews); ask "
        "for a label with a classify function, pass the topic as a second argument "
        "(ai_filter('Does {0} mention {1}?', review, 'battery life')), or use a larger --model"),
    "generation": (
        "the default model (a 270M base model) writes rambling text that often ignores the "
        "instruction; leave --generation-model at auto (the embedded smollm2-135m writes), "
        "or use a larger model"),
    "generation on the embedded writer": (
        "smollm2-135m (embedded, 135M parameters) writes short summaries well but free-form "
        "replies poorly (examples/README.md); pass --generation-model (dbt: generation_model) "
        "a larger model for text people will read"),
    "two-argument question that goes on after its second argument": (
        "the default model scores how strongly the document makes the second argument likely, "
        "and the words after the second argument's slot (e.g. 'is {1} cited by {0}') do not "
        "reach it, so the relation they name is not asked; end the question with the second "
        "argument, or use a larger --model"),
}


def is_default_model(model_id: str) -> bool:
    """Whether `model_id` (a name, with or without its "@precision") names the embedded default
    model, whose measured quirks the rules here apply to."""
    return model_id.split("@")[0] in ("default", DEFAULT_MODEL)


def pair_layout_for(model_name: str) -> bool:
    """Whether two-argument questions use the pair layout with `model_name`'s answers: on the
    embedded default model, where it was measured (yes/no answers there are at chance on
    pairs: bench/results/pair-accuracy.md); elsewhere the yes/no readout every
    warehouse's AI_FILTER documents (one prefill, a few answer-token logits, no full-vocabulary
    span scoring and no threshold tuned on another model)."""
    return is_default_model(model_name)


def repetition_penalty_for(model_name: str) -> float:
    """The repetition penalty of generated text on `model_name` (1.0: plain greedy): the
    embedded models repeat themselves without one; any other model decodes as it is."""
    return EMBEDDED_REPETITION_PENALTY if is_embedded(model_name) else 1.0
