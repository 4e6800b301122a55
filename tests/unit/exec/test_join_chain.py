"""AI join chains run on the joined rows' distinct bindings, held by column (exec/join_runner
Joined): a chain reviews-aspects-reviews-aspects (QUAIL-B's IMDB-9) whose joined rows grow to
the product of its fan-outs asks each distinct (review, aspect) pair once per join and returns
the same rows as DuckDB answering the predicates row by row."""

from dataclasses import replace

import numpy as np
from exec_fakes import FakeEngine

from quail_engine.exec.joined import Joined
from quail_engine.exec.session import QuailSession
from quail_engine.plan.cost import DeviceSpec

ASPECTS = ["plot", "acting", "music", "sound"]
# review i discusses aspect k when the aspect's name appears in it (FakeEngine: a word of 4+
# letters twice in the prompt)
REVIEWS = [(i, " ".join(a for k, a in enumerate(ASPECTS) if (i + k) % 3) + f" film{i}", 1)
           for i in range(30)]
DISCUSS = "AI_FILTER(PROMPT('Does the review {0} discuss the aspect {1}?', R.review, A.name))"
SQL = ("SELECT r1.id AS r1, a1.name AS a1, r2.id AS r2, a2.name AS a2 FROM reviews AS r1 "
       f"JOIN products AS a1 ON {DISCUSS.replace('R.', 'r1.').replace('A.', 'a1.')} "
       f"JOIN reviews AS r2 ON {DISCUSS.replace('R.', 'r2.').replace('A.', 'a1.')} "
       f"JOIN products AS a2 ON {DISCUSS.replace('R.', 'r2.').replace('A.', 'a2.')} "
       "ORDER BY r1, a1, r2, a2")


def _db():
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE reviews (id INTEGER, review VARCHAR, product_id INTEGER)")
    con.executemany("INSERT INTO reviews VALUES (?, ?, ?)", REVIEWS)
    con.execute("CREATE TABLE products (product_id INTEGER, name VARCHAR)")
    con.executemany("INSERT INTO products VALUES (?, ?)", [(1, a) for a in ASPECTS])
    return con


def test_chain_of_three_ai_joins_asks_distinct_pairs_and_returns_every_joined_row(monkeypatch):
    from quail_engine.exec import join_runner

    engines = []
    built = []  # what each join handed to the next: (rows held, joined rows they stand for)
    expand = join_runner.expand

    def spying(*args, **kwargs):
        out = expand(*args, **kwargs)
        built.append((len(out), out.size))
        return out

    monkeypatch.setattr(join_runner, "expand", spying)

    class Counting(FakeEngine):
        asked = 0

        def run(self, requests):
            self.asked += len(requests)
            return super().run(requests)

    def factory():
        engines.append(Counting())
        return engines[-1]

    session = QuailSession(_db(), factory, device_spec=DeviceSpec("toy", 1e11, 2e10))
    rows = session.execute(SQL, "snowflake").to_pylist()
    report = session.report.to_json()
    discusses = {(i, a) for i, text, _ in REVIEWS for a in ASPECTS if a in text.split()}
    expected = sorted({(r1, a1, r2, a2) for (r1, a1) in discusses for (r2, a2) in discusses
                       if (r2, a1) in discusses})
    assert [tuple(r.values()) for r in rows] == expected
    assert len(rows) > len(REVIEWS) * len(ASPECTS) * 4  # the joined rows outgrow the pairs
    ops = report["operators"]
    assert all(o["unplanned"] == 0 for o in ops), ops
    # the second join hands the last one its distinct (aspect, review) pairs, each weighted by
    # the joined rows it stands for, not every joined row; the last join's counts are the same
    assert any(n < size == ops[1]["rows_out"] for n, size in built), (built, ops)
    assert ops[2]["rows_out"] == len(rows)
    # each of the three joins asks each distinct (review, aspect) pair at most once
    assert 0 < engines[0].asked <= 3 * len(REVIEWS) * len(ASPECTS)


def test_joined_rows_grow_and_shrink_by_column():
    cur = Joined({"r": np.array([0, 0, 1, 2]), "a": np.array([5, 6, 5, 7])})
    distinct, inv = cur.distinct(["a"])
    assert distinct[:, 0].tolist() == [5, 6, 7] and distinct[inv, 0].tolist() == [5, 6, 5, 7]
    both, inv2 = cur.distinct(["r", "a"])
    assert len(both) == 4 and (both[inv2] == np.stack([cur.cols["r"], cur.cols["a"]], 1)).all()
    # the tuples in order, one int64 each (mixed radix) or, past 2**62, by np.unique(axis=0)
    rng = np.random.default_rng(3)
    for high in (9, 1 << 12, 1 << 40):  # a table of the keys, a sort of them, np.unique rows
        cols = {k: rng.integers(0, high, 500) % (high if k != "z" else 4) for k in "xyz"}
        wide = Joined(cols)
        got, ginv = wide.distinct(["x", "y", "z"])
        want, winv = np.unique(np.stack([cols[k] for k in "xyz"], 1), axis=0,
                               return_inverse=True)
        assert (got == want).all() and (ginv == winv.reshape(-1)).all()
    for high in (7, 1 << 30):  # one alias: marked in a table, sorted
        col = rng.integers(0, high, 300)
        got, ginv = Joined({"x": col}).distinct(["x"])
        want, winv = np.unique(col, return_inverse=True)
        assert (got[:, 0] == want).all() and (ginv == winv).all()
    kept = cur.take(np.flatnonzero(cur.cols["a"] == 5))
    assert kept.rows() == [{"r": 0, "a": 5}, {"r": 1, "a": 5}]
    assert len(Joined()) == 0 and Joined().distinct([])[0].shape == (0, 0)


def test_only_a_plain_conjunct_joins_through_the_pass_table():
    """A complete AI join that is a plain conjunct of an inner JOIN's ON (or of the WHERE) is
    an inner join with its passing pairs on the arguments' hashes (pass_tables.pass_through:
    DuckDB then forms only the rows out, not every candidate row); one of an outer join's ON
    is a membership test; under OR or NOT, the hash UDF answers it."""
    from quail_engine.exec.udfs import prepare, statement_tree

    sql = ("SELECT * FROM r JOIN p ON quail_ai_0(r.x, p.y) AND r.k = p.k "
           "JOIN q ON (quail_ai_0(r.x, q.y) OR q.z) WHERE NOT quail_ai_0(r.x, q.y)")
    out = prepare(statement_tree(sql), "_s", frozenset({0}), {0: "quail_pass_0_s"}).sql(
        dialect="duckdb").lower()
    assert out.count("join (select distinct h0 as \"quail_p_0_h0\", h1 as \"quail_p_0_h1\" "
                     "from quail_pass_0_s) as \"quail_p_0\" on \"quail_p_0\".\"quail_p_0_h0\" = "
                     "r.\"quail_h_r_0\" and \"quail_p_0\".\"quail_p_0_h1\" = p.\"quail_h_p_0\" "
                     "join q") == 1, out
    assert "on true and r.k = p.k" in out and " in (select" not in out
    assert out.count("quail_ai_0_k_s(hash(") == 2  # under OR, under NOT: the hash UDF
    assert '"quail_p_0_h0", "quail_p_0_h1")' in out  # hidden from the star

    outer = ("SELECT r.*, p.y FROM r LEFT JOIN p ON quail_ai_0(r.x, p.y) JOIN q ON q.k = r.k "
             "WHERE quail_ai_0(r.x, q.y) AND q.z > 1")
    out = prepare(statement_tree(outer), "_s", frozenset({0}), {0: "quail_pass_0_s"}).sql(
        dialect="duckdb").lower()
    assert out.count("in (select (h0, h1) from quail_pass_0_s)") == 1  # the LEFT JOIN's ON
    assert out.endswith('on "quail_p_0"."quail_p_0_h0" = r."quail_h_r_0" and '
                        '"quail_p_0"."quail_p_0_h1" = q."quail_h_q_0" where true and q.z > 1')


def test_pass_table_hashes_are_computed_per_relation_row_and_hidden_from_stars():
    """The membership reads each side's hash from a column its relation computes once per row
    (not per candidate row of the cross product), and `*` / `alias.*` do not show it."""
    session = QuailSession(_db(), FakeEngine, device_spec=DeviceSpec("toy", 1e11, 2e10))
    star = SQL.replace("SELECT r1.id AS r1, a1.name AS a1, r2.id AS r2, a2.name AS a2",
                       "SELECT *, r2.*").replace("ORDER BY r1, a1, r2, a2", "")
    table = session.execute(star, "snowflake")
    plain = _db().sql("SELECT *, r2.* FROM reviews AS r1 JOIN products AS a1 ON TRUE "
                      "JOIN reviews AS r2 ON TRUE JOIN products AS a2 ON TRUE LIMIT 0")
    assert table.column_names == plain.columns and len(plain.columns) == 13
    assert session.report.to_json()["operators"][0]["unplanned"] == 0
    named = QuailSession(_db(), FakeEngine,
                         device_spec=DeviceSpec("toy", 1e11, 2e10)).execute(SQL, "snowflake")
    assert table.num_rows == named.num_rows > 0

    from quail_engine.exec.udfs import prepare, statement_tree

    out = prepare(statement_tree("SELECT * FROM r JOIN p ON quail_ai_0(r.x, p.y)"), "_s",
                  frozenset({0}), {0: "quail_pass_0_s"}).sql(dialect="duckdb")
    assert 'FROM (SELECT *, HASH(CAST(x AS TEXT)) AS "quail_h_r_0" FROM r) AS r' in out
    assert ('"quail_p_0" ON "quail_p_0"."quail_p_0_h0" = r."quail_h_r_0" AND '
            '"quail_p_0"."quail_p_0_h1" = p."quail_h_p_0"') in out
    assert out.startswith('SELECT * EXCLUDE ("quail_h_r_0", "quail_h_p_0", "quail_p_0_h0", '
                          '"quail_p_0_h1")')


class Encodings(FakeEngine):
    """A FakeEngine that records each document it encodes (its prefix tokens)."""

    def __init__(self):
        super().__init__()
        self.encoded: list[tuple[int, ...]] = []

    def add_prefix(self, tokens):
        self.encoded.append(tuple(tokens))
        return super().add_prefix(tokens)


def test_two_joins_anchored_on_the_relation_the_chain_brings_in_encode_it_once():
    """reviews r1 - aspects a1 - reviews r2 - aspects a2, the last two joins anchored on r2 and
    asking different questions (QUAIL-B IMDB-10's shape): r2's documents are encoded once, by
    the first of the two joins that misses an answer, and held for the second
    (join_runner.ask_anchor_pair_ahead); and since r2's documents are r1's, the first join's
    chunks after its first ask both later joins while they hold them (rides.observe_rides,
    judged worth it by the rows the first chunk kept): those reviews are encoded once in all.
    The rows are the plain run's every way."""
    positive = ("AI_FILTER(PROMPT('Is the review {0} POSITIVE about the aspect {1}?', "
                "r2.review, a2.name))")
    sql = SQL.replace(DISCUSS.replace('R.', 'r2.').replace('A.', 'a2.'), positive)

    def run(ahead: bool, rides: bool):
        engine = Encodings()
        import quail_engine.exec.join_runner as jr
        import quail_engine.plan.chunking as chunking

        saved = jr.ask_anchor_pair_ahead, jr.observe_rides, chunking.DEFAULT
        chunking.DEFAULT = replace(chunking.DEFAULT, anchors=5)  # six chunks of the 30 reviews
        if not ahead:
            jr.ask_anchor_pair_ahead = lambda *a, **k: None
        if not rides:
            jr.observe_rides = lambda *a, **k: []
        try:
            session = QuailSession(_db(), lambda: engine, device_spec=DeviceSpec("toy", 1e11, 2e10))
            rows = session.execute(sql, "snowflake").to_pylist()
        finally:
            jr.ask_anchor_pair_ahead, jr.observe_rides, chunking.DEFAULT = saved
        return rows, engine, session.report

    rows, engine, report = run(ahead=True, rides=True)
    ahead_rows, ahead_only, _ = run(ahead=True, rides=False)
    plain_rows, plain, _ = run(ahead=False, rides=False)
    assert rows == ahead_rows == plain_rows and rows
    plan = report.plans[0]
    assert "join #1 r2 anchor=r2" in plan and "join #2 a2 anchor=r2" in plan, plan
    assert "joins #1,#2 share anchor chunks" in plan.splitlines(), plan
    assert {"join #1 was asked over join #0's anchor documents while they were resident",
            "join #2 was asked over join #0's anchor documents while they were resident"
            } <= set(report.remarks), report.remarks

    def times_encoded(e: Encodings, text: str) -> int:
        ids = tuple(e.vocab.get(w, -1) for w in text.split())
        return sum(1 for enc in e.encoded
                   if any(enc[i:i + len(ids)] == ids for i in range(len(enc))))

    texts = [t for _, t, _ in REVIEWS]
    riding = [times_encoded(engine, t) for t in texts]
    ahead = [times_encoded(ahead_only, t) for t in texts]
    before = [times_encoded(plain, t) for t in texts]
    assert sum(ahead) < sum(before), (ahead, before)
    assert max(ahead) <= 2, ahead  # once as r1 (join #0), once as r2 (joins #1 and #2)
    assert riding[5:] == [1] * (len(texts) - 5) and max(riding) <= 2, riding
    assert sum(riding) < sum(ahead), (riding, ahead)


def test_reviews_a_filter_drops_are_encoded_once_for_the_chain_that_reads_them_again(
        monkeypatch):
    """The same chain with an AI filter on r1 (QUAIL-B IMDB-10's shape): the filter encodes
    every review, keeps its survivors' KV for the first join and releases the others; r2 reads
    those too. The later joins are asked over them while the filter chunk holds them (the
    plan's `ride ... over the documents r1's filters drop`), so no review the filter dropped is
    encoded again by r2's joins. The rows are those of the run without it."""
    positive = ("AI_FILTER(PROMPT('Is the review {0} POSITIVE about the aspect {1}?', "
                "r2.review, a2.name))")
    sql = SQL.replace(DISCUSS.replace('R.', 'r2.').replace('A.', 'a2.'), positive).replace(
        "ORDER BY", "WHERE AI_FILTER(PROMPT('Does the review {0} praise the MUSIC?', r1.review)) "
        "ORDER BY")

    def run(rides: bool):
        import quail_engine.exec.filter_runner as cr

        engine = Encodings()
        with monkeypatch.context() as m:
            if not rides:
                m.setattr(cr, "ask_dropped", lambda *a, **k: None)
            session = QuailSession(_db(), lambda: engine,
                                   device_spec=DeviceSpec("toy", 1e11, 2e10))
            rows = session.execute(sql, "snowflake").to_pylist()
        return rows, engine, session.report

    rows, engine, report = run(rides=True)
    plain_rows, plain, _ = run(rides=False)
    assert rows == plain_rows and rows
    assert "ride #1,#2 over the documents r1's filters drop" in report.plans[0].splitlines()
    dropped = [t for _, t, _ in REVIEWS if "music" not in t.split()]

    def times_encoded(e: Encodings, text: str) -> int:
        ids = tuple(e.vocab.get(w, -1) for w in text.split())
        return sum(1 for enc in e.encoded
                   if any(enc[i:i + len(ids)] == ids for i in range(len(enc))))

    assert dropped and [times_encoded(engine, t) for t in dropped] == [1] * len(dropped)
    # without: r2's joins encode them again (but those the join's selectivity sample answered)
    assert sum(times_encoded(plain, t) for t in dropped) > 1.5 * len(dropped)


def test_each_join_asks_its_anchor_chunks_with_the_kv_lifetimes_its_turn_names(monkeypatch):
    """exec/anchor_chunks.ask_pairs holds a chunk's documents, and takes or shares those handed
    in, as the plan's turn says (JoinTurn.kv, plan/join_program.py): the chain's joins are
    asked with exactly the ChunkKV of the turns explain prints (a pair asked ahead, with its
    `ahead_kv`)."""
    from quail_engine.exec import join_runner

    seen = []  # (join, the ChunkKV it was asked with)
    ask = join_runner.ask_pairs

    def spying(step, *args, **kwargs):
        seen.append((step.op, kwargs.get("chunk_kv")))
        return ask(step, *args, **kwargs)

    monkeypatch.setattr(join_runner, "ask_pairs", spying)
    session = QuailSession(_db(), FakeEngine, device_spec=DeviceSpec("toy", 1e11, 2e10))
    session.execute(SQL, "snowflake")
    (plan,) = session.report.plans
    kv_lines = [line for line in plan.splitlines() if " chunk KV: " in line]
    assert len(kv_lines) == 3, plan
    assert seen and all(kv is not None for _, kv in seen), seen
    named: dict[int, set[str]] = {}  # join -> the ChunkKV texts explain names for its asks
    for line in kv_lines:  # "join #0 chunk KV: ...[; ahead with #1: ...]"
        own, *ahead = line.split("; ")
        op = int(own.split()[1][1:])
        named.setdefault(op, set()).add(own.split(": ", 1)[1])
        for part in ahead:  # the pair asked ahead: both joins with the one ChunkKV
            head, text = part.split(": ", 1)
            named[op].add(text)
            named.setdefault(int(head.split("#")[1]), set()).add(text)
    for op, kv in seen:
        assert kv.text() in named[op], (op, kv, kv_lines)
