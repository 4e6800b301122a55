"""The plan of each core with estimates and no model: `explain --table` without --analyze.

Token counts are ~4 characters per token and selectivities are hints or 0.5 (sampling needs the
model: the plan names the samples a run takes; `explain --analyze` runs the query instead). The model's config is read, its weights are
not.
"""

from __future__ import annotations

from quail_engine.exec.answer_store import AnswerStore
from quail_engine.exec.config import SessionConfig
from quail_engine.exec.core_runner import pair_fractions, planned_core
from quail_engine.exec.estimates import op_infos, sample_candidates
from quail_engine.exec.limit_pushdown import push_limit
from quail_engine.exec.op_runner import answer_length
from quail_engine.exec.prompt_text import PromptText
from quail_engine.exec.prompts import OpPrompt, is_decoded
from quail_engine.exec.scans import load_scan
from quail_engine.exec.udfs import read_statement
from quail_engine.plan.context import PlanContext
from quail_engine.plan.cost import ModelSpec
from quail_engine.plan.device import device_spec
from quail_engine.plan.planner import plan_core
from quail_engine.plan.sampling import sample_steps
from quail_engine.sql.ir import binding_column
from quail_engine.sql.op_kinds import spec as spec_of

CHARS_PER_TOKEN = 4
CHAT_OVERHEAD = 8


class _TokenGuess:
    """Tokenizer stand-in for estimates: ~4 characters per token, a few chat tokens."""

    def tokenize(self, texts):
        return [[0] * max(1, len(t) // CHARS_PER_TOKEN) for t in texts]

    def chat_split(self, prefix_text, suffix_text):
        head = [0] * (CHAT_OVERHEAD // 2 + len(prefix_text) // CHARS_PER_TOKEN)
        return head, [0] * (CHAT_OVERHEAD // 2 + max(1, len(suffix_text) // CHARS_PER_TOKEN))


class _GuessRunner:
    engine = _TokenGuess()
    text = PromptText(lambda: _TokenGuess(), "token-guess")
    progress = None

    def __init__(self, answer_cap: int | None = None):
        self.answer_cap = answer_cap

    @staticmethod
    def layout(op):
        return OpPrompt.for_op(op)

    def answer_tokens(self, readout) -> int:
        return answer_length(readout, self.answer_cap)

    def writer_of(self, op):
        return self


def estimated_plans(con, parsed, config: SessionConfig) -> list:
    """The physical plan of every core of `parsed` over the tables of `con`, costed for the
    model and device `config` names, with its answer cache setting."""
    device = device_spec(config.engine_device.kind)
    writer = None
    if config.decode_model != config.model and any(
            spec_of(op.op).is_aggregate and is_decoded(op) for op in parsed.ai_ops):
        writer = model_spec(config.decode_model)
    return estimate_plans(con, parsed, model_spec(config.model), device, config.sample_size,
                          config.use_cache, writer, config.max_new_tokens)


def estimate_plans(con, parsed, spec, device, sample_size: int = SessionConfig.sample_size,
                   use_cache: bool = SessionConfig.use_cache, writer=None,
                   max_new_tokens: int | None = None) -> list:
    """The physical plan of every core, from DuckDB scans and guessed token counts, costed for
    the model `spec` (plan.cost.ModelSpec) on `device` (plan.cost.DeviceSpec); the samples a
    run of `sample_size` rows a predicate takes are named, not taken (they need the model);
    `use_cache`: the session's answer cache is on; `writer`: the generation model's spec when
    it writes an aggregate (a map chunk is sized for it), `max_new_tokens`: the session's cap
    on a generated answer, as a run plans them."""
    plans = []
    limit = push_limit(read_statement(parsed))[1] if parsed.ai_ops else None  # as the session
    # a CTE's operators a core saw through are answered there (it runs first): the CTE's own
    # core asks them again only for rows that core left out, so they are not counted twice
    seen = {op_id: n for n, core in enumerate(parsed.cores) for op_id, _ in core.ops}
    for n, core in enumerate(parsed.cores):
        scans = {rel.alias: load_scan(con, rel) for rel in core.relations}
        ai_ops = core.ops_of(parsed.ai_ops)
        ops = [o for o in (*core.filters, *core.joins, *core.projections, *core.aggregates)
               if seen.get(o, n) == n
               and all(any(binding_column(o, i) in s.columns for s in scans.values())
                       for i in range(len(ai_ops[o].bindings)))]
        samples = sample_steps(sample_candidates(ops, ai_ops, scans),
                               {a: len(s.rows) for a, s in scans.items()}, sample_size)
        infos = op_infos(ops, ai_ops, scans, _GuessRunner(max_new_tokens), AnswerStore())
        ctx = PlanContext(infos, {a: float(len(s.rows)) for a, s in scans.items()}, spec,
                          device, pair_fraction=pair_fractions(scans),
                          columns={a: s.columns for a, s in scans.items()}, writer=writer)
        plans.append(plan_core(planned_core(core, set(ops)), ai_ops, ctx, limit,
                               len(parsed.cores), samples, use_cache))
    return plans


def model_spec(model: str):
    """The cost model's view of `model`, from its config (no weights read)."""
    from quail_engine.infer.loader import read_config, resolve_model_dir  # torch

    return ModelSpec.from_attrs(read_config(resolve_model_dir(model)), name=model)
