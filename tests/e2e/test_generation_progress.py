"""The progress display during generated columns: the generation model's work is counted."""

from __future__ import annotations

import pytest

from quail_engine.exec.facade import SessionConfig, open_session


@pytest.mark.model
def test_progress_counts_the_tokens_the_generation_model_runs(require_embedded):
    """The progress display's token counter includes the writer's tokens (it read the
    session's model alone, so a generated column's progress said 0 tokens, 0 tokens/s)."""
    require_embedded("gemma3-270m")
    require_embedded("smollm2-135m")
    import duckdb

    from quail_engine.exec.progress_sink import NullProgress

    class Counting(NullProgress):
        enabled = True
        counter = None

        def set_token_counter(self, fn):
            Counting.counter = fn

    con = duckdb.connect()
    con.execute("CREATE TABLE docs AS SELECT * FROM (VALUES (1, 'great shoes'), "
                "(2, 'bad laces')) t(id, body)")
    session = open_session(con, SessionConfig(use_cache=False, precision="fp32",
                                              max_new_tokens=4, progress=True),
                           display=Counting)
    session.execute("SELECT id, AI_COMPLETE('m', body) AS s FROM docs", "snowflake")
    assert session.report.generation_model  # the writer wrote the column
    assert Counting.counter() >= sum(op.fresh_tokens for op in session.report.ops.values()) > 0
