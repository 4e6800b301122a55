"""Tokens each AI call of a statement would read, counted on the project's own data.

Each planned AI operator's arguments are read by its core's pushed-down scan (sql/cores.py), the
same query the executor runs. A relation of at most `sample_rows` candidate rows is read whole;
a larger one is sampled (DuckDB's reservoir sample, fixed seed) and the counts are scaled by
its row count (`is_extrapolated`). Every row's prompt is laid out as the executor lays it out
(exec/prompts.py) and counted with the model's tokenizer through the token store: chat framing,
document, question and answer instruction. A join reads every candidate pair (rows x partners,
restricted by its equality keys): its prompt is the anchor's document and the partner's
question, so the pairs' tokens are sums of per-row counts, never one prompt per pair.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from dataclasses import dataclass

from quail_engine.errors import QuailError
from quail_engine.exec.facade import (
    DEFAULT_MAX_TOKENS,
    OpPrompt,
    ScanData,
    load_scan,
    pair_layout_for,
    scan_error,
)
from quail_engine.sql.ir import OpKind, binding_column
from quail_engine.sql.op_kinds import spec

SEED = 7


@dataclass(frozen=True)
class TokenCount:
    """`prompts`: the prompts Quail asks: rows (pairs for a join) that get one, times the
    kind's prompts per row (`OpSpec.num_requests`: a similarity's two directions and its
    content-free reference) and an AI_SENTIMENT's aspects; `input_tokens`: the rows' prompts' tokens, each row's once (what
    the warehouse reads; `quail migrate` times the kind's every prompt: cost._timed);
    `output_tokens`: an upper bound (prompts x max tokens) for generative calls, else None;
    `sampled_rows`: rows read from the data (all relations)."""

    prompts: float
    input_tokens: float
    output_tokens: float | None
    is_extrapolated: bool
    sampled_rows: int


@dataclass(frozen=True)
class _Sample:
    scan: ScanData
    total: int

    @property
    def scale(self) -> float:
        return self.total / len(self.scan.rows) if self.scan.rows else 0.0


class SampleCounter:
    """Counts on the DuckDB connection `con` with the PromptText `text` (exec/prompt_text.py)."""

    def __init__(self, con, text, sample_rows: int):
        self.con, self.text, self.sample_rows = con, text, sample_rows
        self.pair = pair_layout_for(text.model_name)
        self._samples: dict[str, _Sample | str] = {}

    def count(self, parsed) -> dict[int, TokenCount | str]:
        """Per AI operator of `parsed` (a sql.query.ParsedQuery): its TokenCount, or the reason
        its tokens are unknown."""
        out: dict[int, TokenCount | str] = {}
        for core in parsed.cores:
            for op_id in (*core.filters, *core.joins, *core.projections, *core.aggregates):
                out.setdefault(op_id, self._count_op(op_id, parsed.ai_ops[op_id], core))
        for op_id in range(len(parsed.ai_ops)):
            out.setdefault(op_id, "not planned (under OR or NOT, in an outer join's ON, or "
                                  "reading a lateral source): its rows are not counted")
        return out

    def _count_op(self, op_id: int, op, core) -> TokenCount | str:
        aliases = []
        for i in range(len(op.bindings)):
            holder = [r for r in core.relations if binding_column(op_id, i) in r.columns]
            if not holder:
                return "its arguments do not all come from the tables of one query block"
            if holder[0].alias not in aliases:
                aliases.append(holder[0].alias)
        samples = {}
        for alias in aliases:
            relation = next(r for r in core.relations if r.alias == alias)
            sample = self._sample(relation)
            if isinstance(sample, str):
                return sample
            samples[alias] = sample
        if len(samples) == 2 and op.op == OpKind.AI_JOIN:
            return self._count_pairs(op_id, op, samples)
        if len(samples) > 1:  # runs on the join's output rows, which no scan reads
            return "it reads the rows of a join of several tables: not counted before a run"
        return self._count_rows(op_id, op, next(iter(samples.values())))

    def _sample(self, relation) -> _Sample | str:
        found = self._samples.get(relation.scan_sql)
        if found is None:
            found = self._samples[relation.scan_sql] = self._read(relation)
        return found

    def _read(self, relation) -> _Sample | str:
        if relation.calls():
            return "its rows come from another AI call's answers: not counted before a run"
        try:
            total = self.con.execute(f"SELECT count(*) FROM ({relation.scan_sql}) AS q"
                                     ).fetchone()[0]
        except Exception as exc:  # noqa: BLE001 - duckdb raises many types; all mean no scan
            return str(scan_error(exc, relation.alias))
        sql = relation.scan_sql
        if total > self.sample_rows:
            sql = (f"SELECT * FROM ({sql}) AS q USING SAMPLE reservoir({self.sample_rows} ROWS) "
                   f"REPEATABLE ({SEED})")
        try:
            scan = load_scan(self.con, dataclasses.replace(relation, scan_sql=sql))
        except QuailError as exc:
            return str(exc)
        return _Sample(scan, int(total))

    def _count_rows(self, op_id: int, op, sample: _Sample) -> TokenCount:
        values = [tuple(row[binding_column(op_id, i)] for i in range(len(op.bindings)))
                  for row in sample.scan.rows]
        kept = [v for v in values if not any(x is None for x in v)]  # NULL: no prompt
        if spec(op.op).readout == "tokens":
            lengths = [0] * len(kept)  # the tokenizer alone: no model reads anything
        elif spec(op.op).is_aggregate:  # the rows' texts (the group's instruction aside)
            lengths = [len(ids) for ids in self.text.tokenize(
                ["\n\n".join(str(x) for x in v) for v in kept])]
        else:
            layout = OpPrompt.for_op(op, self.pair)
            texts = [layout.texts(v) for v in kept]
            heads = self.text.heads([p for p, _ in texts])
            tails = self.text.tails([s for _, s in texts])
            lengths = [len(h) + len(t) for h, t in zip(heads, tails)]
        # AI_SENTIMENT's aspects: one more question per aspect after the same document (its
        # KV shared: the tokens counted are the document's prompt once)
        aspects = dict(op.task_args).get("aspects")
        prompts = len(kept) * sample.scale * spec(op.op).num_requests * (
            1 + (len(json.loads(aspects)) if aspects else 0))
        return TokenCount(prompts, sum(lengths) * sample.scale, _output(op, prompts),
                          sample.total > len(sample.scan.rows), len(sample.scan.rows))

    def _count_pairs(self, op_id: int, op, samples: dict[str, _Sample]) -> TokenCount:
        layout = OpPrompt.for_op(op, self.pair)
        anchor_alias = op.bindings[layout.doc_slots[0]].alias if layout.doc_slots else None
        if anchor_alias not in samples:
            anchor_alias = next(iter(samples))
        partner_alias = next(a for a in samples if a != anchor_alias)
        anchors, partners = samples[anchor_alias].scan, samples[partner_alias].scan
        keys = sorted(anchors.key_columns & partners.key_columns)
        n = len(op.bindings)
        own = {alias: [i for i in range(n) if binding_column(op_id, i) in samples[alias].scan.columns]
               for alias in samples}

        def values(anchor_row: dict, partner_row: dict) -> tuple:
            row = {**partner_row, **anchor_row}
            return tuple(row.get(binding_column(op_id, i)) for i in range(n))

        def usable(scan: ScanData, alias: str) -> list[int]:
            return [r for r in range(len(scan.rows)) if all(
                scan.rows[r][binding_column(op_id, i)] is not None for i in own[alias])
                and (not keys or None not in scan.key(r, keys))]

        a_rows, b_rows = usable(anchors, anchor_alias), usable(partners, partner_alias)
        filler_a = anchors.rows[a_rows[0]] if a_rows else {}
        filler_b = partners.rows[b_rows[0]] if b_rows else {}
        heads = self.text.heads([layout.texts(values(anchors.rows[r], filler_b))[0]
                                 for r in a_rows])
        tails = self.text.tails([layout.texts(values(filler_a, partners.rows[r]))[1]
                                 for r in b_rows])
        groups: dict[tuple, list[float]] = defaultdict(lambda: [0, 0.0, 0, 0.0])
        for r, ids in zip(a_rows, heads):
            g = groups[anchors.key(r, keys)]
            g[0], g[1] = g[0] + 1, g[1] + len(ids)
        for r, ids in zip(b_rows, tails):
            g = groups[partners.key(r, keys)]
            g[2], g[3] = g[2] + 1, g[3] + len(ids)
        pairs = sum(na * nb for na, _, nb, _ in groups.values())
        tokens = sum(nb * ta + na * tb for na, ta, nb, tb in groups.values())
        a, b = samples[anchor_alias], samples[partner_alias]
        scale = a.scale * b.scale
        extrapolated = a.total > len(anchors.rows) or b.total > len(partners.rows)
        return TokenCount(pairs * scale * spec(op.op).num_requests, tokens * scale, None,
                          extrapolated,
                          len(anchors.rows) + len(partners.rows))


def _output(op, prompts: float) -> float | None:
    """Generated tokens at most: every prompt answered up to its max tokens."""
    kind = spec(op.op)
    if not kind.is_decoded or kind.is_aggregate:  # an aggregate writes once per group
        return None
    return prompts * (op.options.gen.max_tokens or DEFAULT_MAX_TOKENS)
