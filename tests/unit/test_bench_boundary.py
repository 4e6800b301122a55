"""bench/ sits on top: the tests and the test helpers (quail_testing/) never import it, so a
benchmark can change or go without touching a test; bench/tests/ holds the tests of bench's own
code. No module edits sys.path: scripts run as modules (`python -m bench <suite>`) from the
repository root."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = sorted((ROOT / "tests").rglob("*.py"))
HELPERS = sorted((ROOT / "quail_testing").rglob("*.py"))
OURS = sorted(p for folder in ("bench", "tests", "quail_testing", "quail_engine", "quail_kernels",
                               "dbt") for p in (ROOT / folder).rglob("*.py"))


def _imports(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def _edits_sys_path(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        target = node.func.value if isinstance(node, ast.Call) and \
            isinstance(node.func, ast.Attribute) else None
        targets = node.targets if isinstance(node, ast.Assign) else [target]
        for t in targets:
            if isinstance(t, ast.Attribute) and t.attr == "path" and \
                    isinstance(t.value, ast.Name) and t.value.id == "sys":
                return True
    return False


@pytest.mark.parametrize("path", TESTS + HELPERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_tests_and_their_helpers_do_not_import_bench(path):
    bench = [n for n in _imports(ast.parse(path.read_text())) if n.split(".")[0] == "bench"]
    assert not bench, f"{path.relative_to(ROOT)} imports {bench}"


def test_no_module_edits_sys_path():
    edits = [str(p.relative_to(ROOT)) for p in OURS if _edits_sys_path(ast.parse(p.read_text()))]
    assert not edits, edits
