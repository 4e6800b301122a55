"""AI operators inside a CTE that feeds another AI operator (QUAIL-B LEP-6's shape)."""

import pyarrow as pa
import pyarrow.parquet as pq
from exec_fakes import patch_fake_model

from quail_engine.cli import main

SQL = """
WITH areas AS (
  SELECT d.id, d.context,
         AI_CLASSIFY(d.context, ['biology', 'physics']):labels[0]::STRING AS area
  FROM contexts d)
SELECT d.id, s.id AS passage
FROM areas d JOIN passages s
  ON AI_FILTER(PROMPT('Does the passage {1} support the context {0}?', d.context, s.text))
WHERE d.area IN ('biology')
ORDER BY d.id, passage
"""


def test_classify_in_a_cte_then_filtered_and_joined(tmp_path, monkeypatch, capsys):
    pq.write_table(pa.Table.from_pylist([
        {"id": 1, "context": "cells divide in a biology class"},
        {"id": 2, "context": "quarks in physics"}]), tmp_path / "c.parquet")
    pq.write_table(pa.Table.from_pylist([
        {"id": 10, "text": "cells divide quickly"}, {"id": 11, "text": "stars shine"}]),
        tmp_path / "p.parquet")
    patch_fake_model(monkeypatch)
    rc = main(["query", "-e", SQL, "--dialect", "snowflake", "--quiet", "--no-cache",
               "--table", f"contexts={tmp_path / 'c.parquet'}",
               "--table", f"passages={tmp_path / 'p.parquet'}", "--format", "csv"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    # the fake engine: labels by the first label named in the text; a pair is TRUE when a
    # 4+-letter word appears twice ('cells', 'divide' shared by context 1 and passage 10)
    assert [line.replace('"', "") for line in out.out.strip().splitlines()] == [
        "id,passage", "1,10"]
