"""An AI projection that reads both sides of an AI join (QUAIL-B IMDB-15: the sentiment of a
review toward the aspect it was joined with) is answered by the plan for the joined pairs, not
row by row inside DuckDB's final statement."""

from dataclasses import replace

from exec_fakes import FakeEngine, review_db

from quail_engine.exec.session import QuailSession
from quail_engine.plan import chunking, strategy
from quail_engine.plan.cost import DeviceSpec

REVIEWS = [(i, f"note {i} about the widget" if i % 2 else f"note {i} on a gadget battery", 1)
           for i in range(1, 9)]
PRODUCTS = [(1, "widget"), (1, "gadget"), (1, "battery")]
SQL = """
SELECT r.id, p.name,
       AI_CLASSIFY(PROMPT('How does {0} rate {1}?', r.review, p.name),
                   ['widget', 'gadget']):labels[0]::STRING AS rating
FROM reviews AS r
JOIN products AS p ON AI_FILTER(PROMPT('Does {0} mention {1}?', r.review, p.name))
ORDER BY r.id, p.name"""


def test_a_projection_over_joined_pairs_runs_planned():
    s = QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine,
                     device_spec=DeviceSpec("toy", 1e11, 2e10))
    rows = s.execute(SQL, "snowflake").to_pylist()
    ops = s.report.to_json()["operators"]
    assert rows and all(r["rating"] in ("widget", "gadget") for r in rows)
    assert all(o["unplanned"] == 0 for o in ops), ops
    classify = next(o for o in ops if o["kind"] == "ai_classify")
    assert classify["rows_in"] == len(rows)


def test_the_projection_is_asked_for_each_chunk_of_pairs_while_its_documents_are_resident(
        monkeypatch):
    """The core's last join asks the projection over its pairs chunk by chunk, for the pairs
    the chunk kept, while the chunk's anchor documents are held (rides.PairProjection:
    on the GPU the projection's prompts then read the documents' pages through the prefix
    cache instead of encoding them again); the projection asks nothing after the joins, and
    the rows and counts are those of asking it after them."""
    import quail_engine.exec.anchor_chunks as jr

    def run(ride: bool):
        asked: list[list[tuple]] = []
        real = jr.ask_projection

        def spy(pr, values, runner, store):
            asked.append(list(values))
            return real(pr, values, runner, store)

        monkeypatch.setattr(jr, "ask_projection", spy)
        monkeypatch.setattr(chunking, "DEFAULT", replace(chunking.DEFAULT, anchors=3))  # three
        #                                                    chunks of the 8 reviews
        if not ride:
            monkeypatch.setattr(strategy, "pair_projections", lambda plan, ai_ops: ())
        s = QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine,
                         device_spec=DeviceSpec("toy", 1e11, 2e10))
        rows = s.execute(SQL, "snowflake").to_pylist()
        monkeypatch.undo()
        return rows, asked, s.report.to_json()["operators"]

    rows, asked, ops = run(ride=True)
    plain_rows, plain_asked, plain_ops = run(ride=False)
    assert rows == plain_rows and rows and not plain_asked
    assert len([a for a in asked if a]) > 1  # more than one chunk asked it
    assert sum(map(len, asked)) == len(rows)  # each kept pair once, nothing after the joins
    count = {o["kind"]: (o["rows_in"], o["rows_out"], o["unplanned"]) for o in ops}
    assert count == {o["kind"]: (o["rows_in"], o["rows_out"], o["unplanned"])
                     for o in plain_ops}


def test_a_comma_join_filtered_by_an_ai_join_in_the_where_returns_the_join_on_rows():
    """`FROM a, b WHERE AI_FILTER(a, b)`: the final statement joins the passing pairs after the
    comma join (pass_tables.pass_through), and DuckDB returns the JOIN ... ON form's rows."""
    on = ("SELECT r.id, p.name FROM reviews AS r JOIN products AS p "
          "ON AI_FILTER(PROMPT('Does {0} mention {1}?', r.review, p.name)) ORDER BY r.id, p.name")
    comma = ("SELECT r.id, p.name FROM reviews AS r, products AS p "
             "WHERE AI_FILTER(PROMPT('Does {0} mention {1}?', r.review, p.name)) AND r.id > 0 "
             "ORDER BY r.id, p.name")

    def rows(sql):
        s = QuailSession(review_db(REVIEWS, PRODUCTS), FakeEngine,
                         device_spec=DeviceSpec("toy", 1e11, 2e10))
        out = s.execute(sql, "snowflake").to_pylist()
        assert all(o["unplanned"] == 0 for o in s.report.to_json()["operators"])
        return out

    joined = rows(on)
    assert joined and rows(comma) == joined
