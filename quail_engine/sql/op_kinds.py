"""The IR operator kinds and, for each, the facts every layer reads: one record per kind.

The front end types a call's answer by it, the planner treats predicates as filters and joins
by it, the executor lays out prompts, reads answers and routes decodes by it, and `quail
migrate` rates its work by it. A new operator kind is a member of `OpKind` and a row of
`SPECS`; its vendor spellings (parse and emit, every dialect) are one module of sql/functions
and a task's wording is in sql/task_prompts.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class OpKind(StrEnum):
    """The IR operator kinds. Members are `str`s equal to their value (`OpKind.AI_FILTER ==
    "ai_filter"`), so text from SQL, JSON or a cache compares with them directly."""

    AI_FILTER = "ai_filter"              # BOOLEAN from one prefill (TRUE vs FALSE answer tokens)
    AI_JOIN = "ai_join"                  # ai_filter whose bindings span two relations
    AI_CLASSIFY = "ai_classify"          # one label (or several with multi) out of a label list
    AI_SCORE = "ai_score"                # FLOAT from P(TRUE) or a small numeric scale
    AI_GENERATE = "ai_generate"          # free text: prefill + greedy decode
    AI_EXTRACT = "ai_extract"            # decode to a JSON object of named fields
    AI_AGGREGATE = "ai_aggregate"        # one text per group (map-reduce decode)
    AI_EMBED = "ai_embed"                # vector from an encoder pass
    AI_SIMILARITY = "ai_similarity"      # FLOAT similarity of two inputs
    AI_COUNT_TOKENS = "ai_count_tokens"  # INTEGER, tokenizer only


# the SQL types an answer can take (a call's output_type); exec/udfs.py maps each to Arrow
SQL_TYPES = ("BOOLEAN", "VARCHAR", "VARCHAR[]", "DOUBLE", "BIGINT", "JSON", "FLOAT[]")
# how an answer is read out of the model
READOUTS = (
    "boolean",  # TRUE vs FALSE answer tokens of one prefill
    "score",    # P(yes) of one prefill, in the SQL's units
    "label",    # the label whose first tokens score highest after one prefill
    "text",     # prose decoded greedily
    "json",     # an object decoded under its JSON schema
    "tokens",   # the prompt's token count, no model pass
    "vector",   # an embedding (no local model computes one)
)
# what `quail migrate` rates a call's tokens at: measured prefill or join-pair rates; "decode"
# is timed at the prefill rate with its decode excluded
COSTS = ("prefill", "pairs", "decode")


@dataclass(frozen=True)
class OpSpec:
    """What one operator kind is, whatever the vendor spelling.

    `output_type`: the SQL type of a bare call's answer (`multi_output_type` for a multi-label
    call). `is_predicate`: one boolean per row (per candidate pair for a join) that a WHERE /
    ON conjunct filters by: the planner orders it as a filter or join, and its complete answers
    are looked up by argument hash. `shares_document`: the prompt puts the document first so
    its KV is a prefix every question over it reuses. `reads_partner`: a second argument (a
    join partner, a filter's string literal) can be read as a scored span after the question
    (the pair layout). `is_calibrated`: the content-free prompt's margin is subtracted.
    `cost`: the rate `quail migrate` times it at (None: none measured). `num_asks`: the
    requests asked per row (per candidate pair for a join): a similarity reads each text after
    the other (two directions). `num_references`: the content-free prompts the engine runs
    besides them, per row, in prompts of the row's length: a similarity's PMI is the second
    text's likelihood after the first less after a content-free document, so the engine also
    reads each distinct second text after that document (infer/engine.py `_span_answers`; the
    two directions share one prompt per text, kept for the engine's life). Over rows of
    distinct texts that is two prompts a row, each the row's prompt less its first text:
    together about one prompt (a constant second text, e.g. a literal to rank rows by, is
    read once; a text repeated across rows, once). `num_requests`: both, the prompts whose
    work the planner, `quail migrate`'s prompts and its time count per row, each as long as
    the row's one prompt. `refusal`: why a call of this kind is refused when the query is read.
    """

    kind: OpKind
    output_type: str
    readout: str
    cost: str | None
    multi_output_type: str | None = None
    is_predicate: bool = False
    is_aggregate: bool = False
    shares_document: bool = False
    reads_partner: bool = False
    is_calibrated: bool = False
    num_asks: int = 1
    num_references: int = 0
    refusal: str | None = None  # why the local engine refuses this kind (None: it runs)

    def __post_init__(self) -> None:
        if self.output_type not in SQL_TYPES or self.readout not in READOUTS or (
                self.cost is not None and self.cost not in COSTS) or self.num_asks < 1 or (
                self.num_references < 0):
            raise ValueError(f"bad operator spec {self!r}")

    @property
    def num_requests(self) -> int:
        """Prompts the engine runs per row (per candidate pair for a join), each as long as
        the row's one prompt: those asked and their content-free references."""
        return self.num_asks + self.num_references

    @property
    def is_decoded(self) -> bool:
        """Whether the answer is text the model writes (a decode), not read from one
        prefill's logits."""
        return self.readout in ("text", "json")

    def default_type(self, multi: bool = False) -> str:
        """The SQL type of a bare call's answer (`multi`: a multi-label call)."""
        return self.multi_output_type if multi and self.multi_output_type else self.output_type


_PREDICATE = dict(readout="boolean", is_predicate=True, shares_document=True, reads_partner=True,
                  is_calibrated=True)

SPECS: dict[OpKind, OpSpec] = {s.kind: s for s in (
    OpSpec(OpKind.AI_FILTER, "BOOLEAN", cost="prefill", **_PREDICATE),
    OpSpec(OpKind.AI_JOIN, "BOOLEAN", cost="pairs", **_PREDICATE),
    OpSpec(OpKind.AI_CLASSIFY, "VARCHAR", "label", "prefill", multi_output_type="VARCHAR[]",
           shares_document=True, is_calibrated=True),
    OpSpec(OpKind.AI_SCORE, "DOUBLE", "score", "prefill", shares_document=True,
           is_calibrated=True),
    OpSpec(OpKind.AI_GENERATE, "VARCHAR", "text", "decode"),
    OpSpec(OpKind.AI_EXTRACT, "JSON", "json", "decode"),
    OpSpec(OpKind.AI_AGGREGATE, "VARCHAR", "text", "decode", is_aggregate=True),
    OpSpec(OpKind.AI_EMBED, "FLOAT[]", "vector", None, refusal=(
        "quail has no embedding model (AI_SIMILARITY / ai_similarity is supported)")),
    OpSpec(OpKind.AI_SIMILARITY, "DOUBLE", "score", "prefill", num_asks=2, num_references=1),
    OpSpec(OpKind.AI_COUNT_TOKENS, "BIGINT", "tokens", None),
)}
if set(SPECS) != set(OpKind):
    raise ImportError(f"operator kinds without a spec: {sorted(set(OpKind) - set(SPECS))}")


def spec(kind: str) -> OpSpec:
    """The facts of operator kind `kind` (an OpKind or its name)."""
    return SPECS[OpKind(kind)]


def kinds(**facts: object) -> tuple[OpKind, ...]:
    """The kinds whose spec has every given fact, in declaration order:
    `kinds(is_predicate=True)`."""
    return tuple(k for k, s in SPECS.items()
                 if all(getattr(s, name) == value for name, value in facts.items()))
