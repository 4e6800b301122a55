"""A deterministic fake Engine (api.py protocol) and hand-built parsed queries."""

from __future__ import annotations

import re
from dataclasses import dataclass

from quail_engine.infer.api import (
    Answer,
    BooleanReadout,
    EngineStats,
    GenerateReadout,
    LabelReadout,
    PrefixHandle,
    ScoreReadout,
    SpanReadout,
)
from quail_engine.sql.ir import AiOp, Binding, JoinInfo, Label, Options
from quail_engine.sql.placeholder import placeholder_ids
from quail_testing.equalities import equality

WORD = re.compile(r"\S+")
LAYOUT_WORDS = {"text", "question", "above"}  # words of the prompt layout itself, not the data


class FakeEngine:
    """Tokens are whitespace words. Boolean truth: some word of 4+ letters occurs twice in the
    prompt (case-insensitive), e.g. the question's PRICE and a review's 'price'. Labels: the
    first label whose name occurs in the prompt before the answer instruction."""

    model_id = "fake"
    max_context = 4096

    def __init__(self):
        self.stats = EngineStats()
        self.vocab: dict[str, int] = {}
        self.words: list[str] = []
        self.prefixes: dict[int, tuple[int, ...]] = {}
        self.refs: dict[int, int] = {}
        self.calls = 0

    def _ids(self, text: str) -> list[int]:
        out = []
        for w in WORD.findall(text):
            if w not in self.vocab:
                self.vocab[w] = len(self.words)
                self.words.append(w)
            out.append(self.vocab[w])
        return out

    def tokenize(self, texts):
        return [self._ids(t) for t in texts]

    def chat_split(self, prefix_text, suffix_text):
        return self._ids("<user> " + prefix_text), self._ids(suffix_text + " <assistant>")

    def add_prefix(self, tokens):
        pid = len(self.prefixes) + 1
        self.prefixes[pid] = tuple(tokens)
        self.refs[pid] = 1
        self.stats.fresh_tokens += len(tokens)
        return PrefixHandle(pid, len(tokens))

    def retain(self, handle):
        self.refs[handle.id] += 1

    def release(self, handle):
        self.refs[handle.id] -= 1

    @property
    def resident(self) -> int:
        return sum(1 for n in self.refs.values() if n > 0)

    def run(self, requests):
        self.calls += 1
        out = []
        for r in requests:
            prefix = self.prefixes[r.prefix.id] if r.prefix else ()
            if r.prefix:
                assert self.refs[r.prefix.id] > 0, "request names a released prefix"
            self.stats.requested_tokens += len(prefix) + len(r.tokens)
            self.stats.fresh_tokens += len(r.tokens)
            text = " ".join(self.words[i] for i in (*prefix, *r.tokens))
            out.append(self._answer(r.readout, text))
        return out

    @staticmethod
    def _answer(readout, text):
        body = text.split("Answer ")[0]
        words = [w.strip("?.,!:()").lower() for w in body.split()]
        long = [w for w in words if len(w) >= 4 and w.isalpha() and w not in LAYOUT_WORDS]
        truth = len(long) != len(set(long))
        if isinstance(readout, (BooleanReadout, SpanReadout)):
            return Answer(truth, 1.0 if truth else 0.0)
        if isinstance(readout, ScoreReadout):
            return Answer(1.0 if truth else 0.0, 1.0 if truth else 0.0)
        if isinstance(readout, LabelReadout):
            hit = next((lb for lb in readout.labels if lb.lower() in words), readout.labels[0])
            return Answer(hit, 1.0)
        assert isinstance(readout, GenerateReadout)
        return Answer("about " + (long[0] if long else "nothing"))


@dataclass(frozen=True)
class Relation:
    alias: str
    scan_sql: str
    scan = None  # no tree: built by hand

    def calls(self) -> frozenset[int]:
        return frozenset(placeholder_ids(self.scan_sql))


@dataclass(frozen=True)
class Core:
    relations: tuple
    filters: tuple = ()
    joins: tuple = ()
    projections: tuple = ()
    ops: tuple = ()

    def ops_of(self, ai_ops) -> list:
        return list(ai_ops)


@dataclass(frozen=True)
class Parsed:
    dialect: str
    source_sql: str
    ai_ops: tuple
    duckdb_sql: str
    cores: tuple


def bfilter(question: str, sel: float | None = None, order: str | None = None) -> AiOp:
    return AiOp("ai_filter", question + " {0}", (Binding(0, "r.review", "r", "review"),),
                options=Options(selectivity=sel, order=order), output_type="BOOLEAN")


def classify(labels=("positive", "negative")) -> AiOp:
    return AiOp("ai_classify", "Classify {0}", (Binding(0, "r.review", "r", "review"),),
                labels=tuple(Label(x) for x in labels), output_type="VARCHAR")


def generate() -> AiOp:
    return AiOp("ai_generate", "Summarize: {0}", (Binding(0, "r.review", "r", "review"),),
                output_type="VARCHAR")


def ajoin(anchor=None) -> AiOp:
    return AiOp("ai_join", "Does the review {0} mention {1}?",
                (Binding(0, "r.review", "r", "review"), Binding(1, "p.name", "p", "name")),
                options=Options(anchor=anchor), output_type="BOOLEAN",
                join=JoinInfo("inner", ("r",), ("p",), (equality("r.product_id = p.product_id"),)))


def filters_query(ops, where=(0, 1), project=(2,), table="reviews"):
    cols = ", ".join(f"r.review AS b_{i}_0" for i in range(len(ops)))
    sel = ", ".join(f"quail_ai_{i}(r.review) AS a{i}" for i in project)
    cond = " AND ".join(f"quail_ai_{i}(r.review)" for i in where) or "TRUE"
    sql = (f"SELECT r.id{', ' + sel if sel else ''} FROM {table} AS r WHERE {cond} "
           f"ORDER BY r.id")
    core = Core((Relation("r", f"SELECT {cols} FROM {table} AS r"),), tuple(where), (),
                tuple(project))
    return Parsed("duckdb", sql, tuple(ops), sql, (core,))


def join_query(op, review_filter=None):
    """`op` joining reviews r and products p; `review_filter`: an AI filter on r.review as
    operator 1 (in WHERE)."""
    where = " WHERE quail_ai_1(r.review)" if review_filter is not None else ""
    sql = ("SELECT r.id, p.name FROM reviews AS r JOIN products AS p ON "
           "r.product_id = p.product_id AND quail_ai_0(r.review, p.name)" + where +
           " ORDER BY r.id, p.name")
    filtered = ", r.review AS b_1_0" if review_filter is not None else ""
    core = Core((Relation("r", f"SELECT r.review AS b_0_0{filtered}, r.product_id AS k_0 "
                               "FROM reviews r"),
                 Relation("p", "SELECT p.name AS b_0_1, p.product_id AS k_0 FROM products p")),
                (1,) if review_filter is not None else (), (0,), ())
    ops = (op,) if review_filter is None else (op, review_filter)
    return Parsed("duckdb", sql, ops, sql, (core,))


def review_db(reviews, products):
    """A DuckDB connection with `reviews (id, review, product_id)` and `products (product_id,
    name)` filled from the given rows."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE reviews (id INTEGER, review VARCHAR, product_id INTEGER)")
    con.executemany("INSERT INTO reviews VALUES (?, ?, ?)", reviews)
    con.execute("CREATE TABLE products (product_id INTEGER, name VARCHAR)")
    con.executemany("INSERT INTO products VALUES (?, ?)", products)
    return con


def patch_fake_model(monkeypatch):
    """Make `quail query` / `explain --analyze` load a FakeEngine and tokenize with it."""
    import quail_engine.infer.engine as engine_mod
    from quail_engine.exec.prompt_text import PromptText

    engine = FakeEngine()
    monkeypatch.setattr(engine_mod.LocalEngine, "load", classmethod(lambda cls, *a, **k: engine))
    monkeypatch.setattr(PromptText, "of_model", classmethod(  # ids differ per fake
        lambda cls, spec, tokens_dir=None, variant="", resolve=None: (
            cls(lambda: engine, "fake"), None)))
    return engine
