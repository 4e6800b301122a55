"""The IR and the planner are leaves: importable (and usable) on a machine without sqlglot."""

import subprocess
import sys

import pytest

LEAVES = [
    "quail_engine.sql.ir",
    "quail_engine.plan",
    "quail_engine.plan.optimizer",
    "quail_engine.plan.planner",
    "quail_engine.plan.cost",
    "quail_engine.plan.device",
]


@pytest.mark.parametrize("module", LEAVES)
def test_module_imports_without_sqlglot(module):
    code = (f"import sys, {module}\n"
            "from quail_engine.sql.ir import AiOp, binding_column\n"
            "AiOp('ai_filter', 'x'); binding_column(0, 0)\n"
            "loaded = [m for m in ('sqlglot', 'torch', 'duckdb') if m in sys.modules]\n"
            "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
