"""The layers talk as docs/ARCHITECTURE.md says: argparse and stdout only in cli/, and the dbt
adapter reaches the engine through the exec facade (quail_engine.exec) and settings alone."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = sorted((ROOT / "dbt" / "adapters" / "quail").glob("*.py"))
EXEC = sorted((ROOT / "quail_engine" / "exec").glob("*.py"))
ADAPTER_PENDING: set[str] = set()
ADAPTER_MAY_IMPORT = {"quail_engine", "quail_engine.exec", "quail_engine.settings"}


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", [p for p in ADAPTER if p.name not in ADAPTER_PENDING],
                         ids=lambda p: p.name)
def test_adapter_uses_only_the_exec_facade(path):
    engine = [n for n in _imports(path) if n.split(".")[0] == "quail_engine"]
    assert set(engine) <= ADAPTER_MAY_IMPORT, f"{path.name} imports {engine}"


@pytest.mark.parametrize("path", EXEC, ids=lambda p: p.name)
def test_exec_has_no_argparse_and_writes_no_stdout(path):
    assert "argparse" not in _imports(path)
    assert "sys.stdout" not in path.read_text()
