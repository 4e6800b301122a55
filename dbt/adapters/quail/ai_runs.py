"""The last AI run of each AI model, kept beside its table so `dbt docs generate` can show it.

adapter_response lives in one run's run_results.json, which `dbt docs generate` overwrites;
docs read the manifest (the project's files: node meta and docs blocks hold no run data) and
the catalog (what the database says about each table, where adapters put "stats"). So each
AI model's work is written to `main._quail_ai_runs` in the model's database, in the model's own
transaction (a model that fails leaves the previous record, like its previous table), and
`quail__get_catalog` adds it to the table's stats, which dbt docs shows in the model page's
Details.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any

RUNS_TABLE = "_quail_ai_runs"
_COLUMNS = (
    ("schema_name", "varchar"), ("table_name", "varchar"), ("node", "varchar"),
    ("run_at", "varchar"), ("rows_affected", "bigint"), ("prompts", "bigint"),
    ("prompts_run", "bigint"), ("cache_hits", "bigint"), ("fresh_tokens", "bigint"),
    ("requested_tokens", "bigint"), ("seconds", "double"), ("load_seconds", "double"),
    ("sol_seconds", "double"), ("device", "varchar"), ("ai_model", "varchar"),
    ("plan", "varchar"))
_CREATE_LOCK = threading.Lock()


def runs_table(database: str) -> str:
    return f'{_quote(database)}.main."{RUNS_TABLE}"'


def record(connections: Any, raw_cursor: Any, relation: Any, node: str,
           work: dict[str, Any]) -> None:
    """Replace the record of `relation` (the model's table) with `work`
    (run_summary.work_fields). The table is created on its own connection first: two models'
    transactions both creating it would conflict."""
    table = runs_table(relation.database)
    with _CREATE_LOCK:
        columns = ", ".join(f"{name} {kind}" for name, kind in _COLUMNS)
        raw_cursor.execute(f"create table if not exists {table} ({columns})")
    connections.add_query(f"delete from {table} where schema_name = ? and table_name = ?",
                          bindings=[relation.schema, relation.identifier])
    values = {"schema_name": relation.schema, "table_name": relation.identifier, "node": node,
              "run_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"), **work}
    names = [name for name, _ in _COLUMNS]
    connections.add_query(
        f"insert into {table} ({', '.join(names)}) values ({', '.join('?' for _ in names)})",
        bindings=[values[name] for name in names])


def _quote(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'
