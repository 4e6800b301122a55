"""Each operator kind's vendor spellings live in one module of quail_engine/sql/functions: the
vendor tables the parsers and emitters dispatch from hold exactly what those modules register,
so adding a kind is its OpSpec, its task wording and one functions module (issue 41 item 3)."""

from __future__ import annotations

import importlib
import types

import pytest

from quail_engine.settings import DIALECTS
from quail_engine.sql import dialects, functions
from quail_engine.sql.op_kinds import OpKind

# vendor-wide factories a kind's module may register (each builds its entry from the kind)
SHARED = {
    ("quail_engine.sql.dialects.duckdb", "templated.<locals>.build"),
    ("quail_engine.sql.dialects.duckdb", "unary.<locals>.build"),
    ("quail_engine.sql.emit.duckdb", "prompt_call"),
    ("quail_engine.sql.emit.databricks", "refused.<locals>.emit"),
}


def _emitters(dialect: str) -> dict:
    return importlib.import_module(f"quail_engine.sql.emit.{dialect}").EMITTERS


@pytest.mark.parametrize("kind", list(OpKind))
def test_every_kind_has_one_module_with_every_dialect(kind):
    owners = [m for m in functions.MODULES.values() if kind in m.KINDS]
    assert len(owners) == 1, f"{kind}: {[m.__name__ for m in owners]}"
    assert set(owners[0].PARSE) == set(owners[0].EMIT) == set(DIALECTS)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_vendor_tables_hold_only_what_the_functions_modules_register(dialect):
    module = dialects.get(dialect)
    parse = {name: fn for m in functions.MODULES.values() for name, fn in m.PARSE[dialect].items()}
    emit = {kind: m.EMIT[dialect] for m in functions.MODULES.values() for kind in m.KINDS}
    wrappers = {shape: paths for m in functions.MODULES.values()
                for shape, paths in getattr(m, "WRAPPERS", {}).get(dialect, {}).items()}
    assert module.FUNCTIONS == parse
    assert _emitters(dialect) == emit
    assert getattr(module, "WRAPPERS", {}) == wrappers


@pytest.mark.parametrize("name", sorted(functions.MODULES))
def test_a_kinds_entries_are_written_in_its_module(name):
    """A builder or emitter written in a vendor file and only registered from here would
    scatter the kind again: each is the module's own code (a package's: its submodules') or a
    vendor-wide factory."""
    module = functions.MODULES[name]
    entries = [fn for table in module.PARSE.values() for fn in table.values()]
    entries += list(module.EMIT.values())
    strays = [f"{fn.__module__}.{fn.__qualname__}" for fn in entries
              if fn.__module__ != module.__name__
              and not fn.__module__.startswith(f"{module.__name__}.")
              and (fn.__module__, fn.__qualname__) not in SHARED]
    assert strays == []


def test_a_vendor_name_registered_twice_is_refused():
    clash = types.ModuleType("quail_engine.sql.functions.clash")
    clash.KINDS, clash.EMIT = (), {}
    clash.PARSE = {"snowflake": {"AI_FILTER": lambda call: None}}
    with pytest.raises(ImportError, match="snowflake AI_FILTER is registered twice"):
        functions._merge(clash)
    assert dialects.get("snowflake").FUNCTIONS["AI_FILTER"] is \
        functions.MODULES["filter"].PARSE["snowflake"]["AI_FILTER"]
