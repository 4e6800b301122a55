"""The layers talk as docs/ARCHITECTURE.md says: argparse and stdout only in cli/, the dbt
adapter reaches the engine through the exec facade (quail_engine.exec) and settings alone, and
no module outside exec/ (cli/, migrate/, the adapter, ...) imports an exec module but the
facade."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = sorted((ROOT / "dbt" / "adapters" / "quail").glob("*.py"))
EXEC = sorted((ROOT / "quail_engine" / "exec").glob("*.py"))
OUTSIDE_EXEC = [p for p in sorted((ROOT / "quail_engine").rglob("*.py"))
                if not p.is_relative_to(ROOT / "quail_engine" / "exec")] + ADAPTER
FACADE = {"quail_engine.exec", "quail_engine.exec.facade"}
ADAPTER_PENDING: set[str] = set()
ADAPTER_MAY_IMPORT = {"quail_engine", "quail_engine.exec", "quail_engine.settings"}


def _imports(path: Path) -> set[str]:
    """The modules `path` imports, `from quail_engine.exec import scans` and relative imports
    included (`from M import N` counts M, and M.N where N is a module)."""
    package = ".".join(path.relative_to(ROOT).parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(filter(None, [base, node.module]))
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names
                                 if _is_module(f"{module}.{alias.name}")}
    return found


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or path.is_dir()


@pytest.mark.parametrize("path", [p for p in ADAPTER if p.name not in ADAPTER_PENDING],
                         ids=lambda p: p.name)
def test_adapter_uses_only_the_exec_facade(path):
    engine = {n for n in _imports(path) if n.split(".")[0] == "quail_engine"}
    assert engine <= ADAPTER_MAY_IMPORT, f"{path.name} imports {sorted(engine)}"


@pytest.mark.parametrize("path", EXEC, ids=lambda p: p.name)
def test_exec_has_no_argparse_and_writes_no_stdout(path):
    assert "argparse" not in _imports(path)
    assert "sys.stdout" not in path.read_text()


@pytest.mark.parametrize("path", OUTSIDE_EXEC, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_the_facade_of_exec_is_imported_outside_it(path):
    inner = {n for n in _imports(path) - FACADE if n.startswith("quail_engine.exec.")}
    assert not inner, f"{path.relative_to(ROOT)} imports {sorted(inner)}: use exec/facade.py"


def test_the_cli_and_the_exec_facade_import_no_torch():
    """`quail --help`, `quail transpile` and a fully cached query stay fast on any machine: the
    CLI's modules and the facade leave torch (and Triton, transformers, Ray) to the engine's
    load."""
    modules = sorted(f"quail_engine.{p.relative_to(ROOT / 'quail_engine').with_suffix('')}"
                     .replace("/", ".") for p in (ROOT / "quail_engine" / "cli").glob("*.py"))
    code = (f"import sys, quail_engine.exec, quail_engine.exec.config, {', '.join(modules)}\n"
            "heavy = [m for m in ('torch', 'triton', 'transformers', 'ray') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
