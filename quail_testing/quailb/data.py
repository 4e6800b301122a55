"""Seeded synthetic corpora for QUAIL-B's nine tables: the benchmark's table and column names,
its row counts per scale factor (docs/workload.md of fsdatalab/quail-bench) and text lengths
shaped like the real corpora; the words are synthetic (the real data lives in object storage
these machines cannot reach).

`generate(out_dir, scale)` writes one Parquet file per table and returns {table: path};
`scale` is "tiny" (a handful of short rows per table, for the CPU test), "0.1", "0.5" or "1.0".
`sample` ({table: n}) keeps a table's first n rows: its rows are drawn independently, so they
are a uniform sample of that table at that scale (BIO-4 at sf1.0 on the H200 is ~2 hours of
device time whole; on a sample of its reports each report meets every term, as at full scale).

Length shapes (words; ~1.3 tokens a word): reviews lognormal around 175 words (IMDB: median
~230 tokens, long tail to ~2,500 words); reports long (BioDEX full texts, thousands of words);
terms 1-4 words (MedDRA reaction terms); claims one sentence; evidence a Wikipedia lead
(~100-400 words); excerpts ~60-250 words, cited passages ~20-120 words; agent traces are
cumulative snapshots every fifth assistant turn of one trajectory (each snapshot a prefix of the
next, so the rows of a trajectory share their beginnings), capped at 24,000 tokens. The
medians are estimates from the public corpora's descriptions, not measured on them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SEED = 20260818  # the benchmark's DATA_SEED, so a scale names one synthetic corpus
TOKENS_PER_WORD = 1.3
AGENT_TRACE_MAX_TOKENS = 24_000
AGENT_TURN_INTERVAL = 5

# QUAIL-B's twelve aspects (quail_b/data.py ASPECTS): the benchmark's data.
ASPECTS = ("the acting", "the plot", "the directing", "the cinematography", "the soundtrack",
           "the pacing", "the ending", "the dialogue", "the special effects",
           "the character development", "the screenplay", "the editing")

# rows per table at each published scale factor (docs/workload.md), and the tiny CPU scale
ROWS = {
    "0.1": {"reviews": 5_000, "aspects": 12, "reports": 500, "terms": 1_127, "claims": 500,
            "evidence": 287, "citation_contexts": 500, "citation_passages": 433,
            "agent_traces": 1_772},
    "0.5": {"reviews": 25_000, "aspects": 12, "reports": 2_500, "terms": 2_934, "claims": 2_500,
            "evidence": 1_037, "citation_contexts": 2_496, "citation_passages": 1_756,
            "agent_traces": 8_859},
    "1.0": {"reviews": 50_000, "aspects": 12, "reports": 5_000, "terms": 4_144, "claims": 5_000,
            "evidence": 1_478, "citation_contexts": 4_972, "citation_passages": 2_991,
            "agent_traces": 17_711},
    "tiny": {"reviews": 3, "aspects": 2, "reports": 2, "terms": 3, "claims": 2, "evidence": 2,
             "citation_contexts": 2, "citation_passages": 2, "agent_traces": 2},
}
TABLES = tuple(ROWS["0.1"])


@dataclass(frozen=True)
class Shape:
    """Words per document: lognormal around `median` with spread `sigma`, clipped."""
    median: float
    sigma: float
    low: int
    high: int

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        words = rng.lognormal(math.log(self.median), self.sigma, n)
        return np.clip(words, self.low, self.high).astype(int)


# published scales; tiny divides lengths so that CPU runs stay in seconds
SHAPES = {
    "reviews": Shape(175, 0.7, 10, 2_500),
    "reports": Shape(3_000, 0.6, 150, 15_000),
    "terms": Shape(2, 0.4, 1, 4),
    "claims": Shape(9, 0.3, 4, 30),
    "evidence": Shape(200, 0.5, 30, 600),
    "citation_contexts": Shape(130, 0.5, 40, 400),
    "citation_passages": Shape(50, 0.5, 15, 200),
}
TINY = {"reviews": 30, "reports": 45, "claims": 10, "evidence": 30, "citation_contexts": 30,
        "citation_passages": 20}  # words, fixed, in tiny mode

_VOCAB = {
    "reviews": "movie film acting plot ending scene director story actor actress character "
               "music soundtrack pacing dialogue camera script performance laugh boring great "
               "terrible beautiful slow twist sequel cast role screen hour moment".split(),
    "reports": "patient dose mg daily treatment reported adverse event hospital admitted "
               "symptoms onset therapy discontinued drug reaction serum level observed clinical "
               "case history diagnosis week recovered infusion tablet laboratory".split(),
    "terms": "nausea headache rash dizziness fatigue pain hypotension tachycardia seizure "
             "vomiting fever insomnia oedema anaemia pruritus syncope dyspnoea "
             "arrhythmia neuropathy tremor hepatitis".split(),
    "claims": "was born in the city released album played for founded wrote starred directed "
              "is a country river film band president novel award won team".split(),
    "evidence": "is an american known for the born in was career first album film series "
                "city located population university founded member years later released "
                "awards early life work".split(),
    "citation_contexts": "court held plaintiff defendant appeal statute claim evidence trial "
                         "jurisdiction the case here motion ruling we conclude reasoning "
                         "precedent district circuit judgment".split(),
    "citation_passages": "a party may not rule the court shall unless where law requires "
                         "standard review reasonable doubt liability duty".split(),
    "agent": "open file run tests edit function error traceback fix import module patch "
             "assert value return class config install failed passed search grep diff".split(),
}


def _text(rng: np.random.Generator, vocab: list[str], words: int) -> str:
    picks = rng.integers(0, len(vocab), words)
    out, sentence = [], []
    for i, k in enumerate(picks):
        sentence.append(vocab[k])
        if len(sentence) >= 12 or i == words - 1:
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    return " ".join(out)


def _docs(rng: np.random.Generator, table: str, n: int, tiny: bool,
          vocab: str | None = None) -> list[str]:
    lengths = [TINY[table]] * n if tiny else SHAPES[table].draw(rng, n)
    return [_text(rng, _VOCAB[vocab or table], int(w)) for w in lengths]


def _tokens(text: str) -> int:
    return math.ceil(len(text.split()) * TOKENS_PER_WORD)


def _agent_rows(rng: np.random.Generator, n: int, tiny: bool) -> list[dict]:
    """Cumulative snapshots: every fifth assistant turn of each trajectory, prefixes of one
    growing transcript, under the token cap."""
    rows: list[dict] = []
    trajectory = 0
    while len(rows) < n:
        tid = f"at{trajectory:04d}"
        turns = 12 if tiny else int(rng.integers(10, 120))
        pieces = [f"[USER]\n{_text(rng, _VOCAB['agent'], 12 if tiny else 120)}"]
        for turn in range(1, turns + 1):
            words = 6 if tiny else int(rng.integers(20, 400))
            pieces.append(f"[ASSISTANT]\n{_text(rng, _VOCAB['agent'], words)}")
            pieces.append(f"[TOOL]\n{_text(rng, _VOCAB['agent'], words // 2 + 1)}")
            if turn % AGENT_TURN_INTERVAL:
                continue
            snapshot = "\n\n".join(pieces)
            tokens = _tokens(snapshot)
            if tokens > AGENT_TRACE_MAX_TOKENS:
                break
            rows.append({"id": f"{tid}-t{turn:03d}", "trace": snapshot, "trajectory_id": tid,
                         "turn_index": turn, "token_count": tokens})
            if len(rows) >= n:
                break
        trajectory += 1
    return rows


def tables(scale: str = "tiny", names: Iterable[str] | None = None,
           sample: Mapping[str, int] | None = None) -> dict[str, pa.Table]:
    """The nine tables at `scale`, seeded: the same scale always gives the same corpus.
    `names`: only these (every table is drawn from one generator in a fixed order; the agent
    traces, drawn last, are skipped when not asked: 17,711 snapshots at sf1.0). `sample`:
    {table: n}, the first n rows of each named table."""
    if scale not in ROWS:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(ROWS)}")
    wanted = TABLES if names is None else tuple(names)
    sample = sample or {}
    check_tables(wanted)
    check_sample(sample, scale)
    drawn = _draw(scale, "agent_traces" in wanted)
    return {name: drawn[name].slice(0, sample.get(name, drawn[name].num_rows))
            for name in TABLES if name in wanted}


def check_tables(names: Iterable[str]) -> None:
    for name in names:
        if name not in TABLES:
            raise ValueError(f"unknown table {name!r}; expected one of {', '.join(TABLES)}")


def check_sample(sample: Mapping[str, int], scale: str) -> None:
    """A ValueError naming the table and its rows unless each n is within its table."""
    check_tables(sample)
    for name, n in sample.items():
        if not 0 < n <= ROWS[scale][name]:
            raise ValueError(f"{name} has {ROWS[scale][name]:,} rows at scale {scale}, not {n}")


def _draw(scale: str, agent: bool) -> dict[str, pa.Table]:
    rows, tiny = ROWS[scale], scale == "tiny"
    rng = np.random.default_rng(SEED)
    out: dict[str, pa.Table] = {}
    n = rows["reviews"]
    out["reviews"] = pa.table({"id": [f"rv{i}" for i in range(n)],
                               "body": _docs(rng, "reviews", n, tiny)})
    aspects = list(ASPECTS[:rows["aspects"]])
    out["aspects"] = pa.table({"id": [f"as{i}" for i in range(len(aspects))],
                               "aspect": aspects})
    n_terms = rows["terms"]
    term_words = [1] * n_terms if tiny else SHAPES["terms"].draw(rng, n_terms)
    terms: list[str] = []
    for w in term_words:  # distinct terms, as the benchmark's vocabulary table is
        term = _text(rng, _VOCAB["terms"], int(w)).rstrip(".")
        while term in terms:
            term += f" {_VOCAB['terms'][int(rng.integers(len(_VOCAB['terms'])))]}"
        terms.append(term)
    out["terms"] = pa.table({"id": [f"tm{i}" for i in range(n_terms)], "term": terms})
    n = rows["reports"]
    reactions = [[terms[int(k)] for k in rng.choice(n_terms, min(n_terms, 3), replace=False)]
                 for _ in range(n)]
    out["reports"] = pa.table({"id": [f"rp{i}" for i in range(n)],
                               "report": _docs(rng, "reports", n, tiny),
                               "reactions": reactions})
    n_ev = rows["evidence"]
    pages = [f"Page_{i}" for i in range(n_ev)]
    out["evidence"] = pa.table({"id": pages, "text": _docs(rng, "evidence", n_ev, tiny)})
    n = rows["claims"]
    out["claims"] = pa.table({
        "id": [f"cl{i}" for i in range(n)], "claim": _docs(rng, "claims", n, tiny),
        "label": [("SUPPORTS", "REFUTES")[int(k)] for k in rng.integers(0, 2, n)],
        "evidence_wiki_url": [pages[i % n_ev] for i in range(n)]})
    n_p = rows["citation_passages"]
    out["citation_passages"] = pa.table({
        "id": [f"lp{i}" for i in range(n_p)],
        "passage_text": _docs(rng, "citation_passages", n_p, tiny),
        "passage_ids": [[str(100_000 + i)] for i in range(n_p)]})
    n = rows["citation_contexts"]
    out["citation_contexts"] = pa.table({
        "id": [f"lc{i}" for i in range(n)],
        "destination_context": _docs(rng, "citation_contexts", n, tiny),
        "cited_passage_ids": [[str(100_000 + i % n_p)] for i in range(n)]})
    if agent:  # (drawn last: the other tables do not depend on it)
        out["agent_traces"] = pa.Table.from_pylist(
            _agent_rows(rng, rows["agent_traces"], tiny), schema=pa.schema([
                ("id", pa.string()), ("trace", pa.string()), ("trajectory_id", pa.string()),
                ("turn_index", pa.int32()), ("token_count", pa.int32())]))
    return out


def generate(out_dir: str | Path, scale: str = "tiny", names: Iterable[str] | None = None,
             sample: Mapping[str, int] | None = None) -> dict[str, Path]:
    """Write the tables at `scale` (`names`, `sample`: see tables()) as Parquet under out_dir;
    returns {table: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, table in tables(scale, names, sample).items():
        paths[name] = out / f"{name}.parquet"
        pq.write_table(table, paths[name])
    return paths
