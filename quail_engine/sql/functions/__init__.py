"""Every vendor's spelling of each AI function, kept by what the function does: one module per
operator kind (filter.py: ai_filter and ai_join), each holding

- `KINDS`: the operator kinds it owns (every OpKind is owned by one module);
- `PARSE`: dialect -> {vendor function name, upper case -> builder(Call) -> Built}, merged
  into that dialect's `FUNCTIONS` (sql/dialects/<dialect>.py);
- `EMIT`: dialect -> emitter(AiOp, args) -> SQL text of its kinds, merged into that dialect's
  `EMITTERS` (sql/emit/<dialect>.py); a kind a warehouse lacks has an emitter that refuses;
- optionally `WRAPPERS`: dialect -> {shape -> {path -> Wrapper}}, the result wrappers its
  functions' shapes strip, merged into that dialect's `WRAPPERS`;
- optionally `NOTES`: notes(AiOp, default max new tokens) -> the documented differences of a
  call's answer on Quail (docs/migrate.md), merged into `NOTES` (kind -> notes) for `quail
  migrate` (migrate/differences.py); a kind that answers as the vendor's does has none;
- optionally `REFUSAL_NOTE`: `quail migrate`'s words for a refused kind, merged into
  `REFUSAL_NOTES` (kind -> text; else the report gives OpSpec.refusal).

Importing this package imports every module in it and merges its tables (sql/dialects.get and
sql/emit/common.dispatch import it first), so a new kind is one module here besides its
OpSpec (sql/op_kinds.py) and task wording (sql/task_prompts.py). What is the same for every
function of a vendor (its sqlglot dialect, option readers, result unwrapping, prompt spelling)
stays in the vendor modules.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from types import ModuleType

from quail_engine.settings import DIALECTS
from quail_engine.sql.ir import AiOp
from quail_engine.sql.op_kinds import OpKind

MODULES: dict[str, ModuleType] = {}  # module name -> module, in name order
NOTES: dict[OpKind, Callable[[AiOp, int], list[str]]] = {}
REFUSAL_NOTES: dict[OpKind, str] = {}


def _merge(module: ModuleType) -> None:
    for dialect, entries in module.PARSE.items():
        _add(importlib.import_module(f"quail_engine.sql.dialects.{dialect}").FUNCTIONS,
             entries, module, dialect)
    for dialect, shapes in getattr(module, "WRAPPERS", {}).items():
        _add(importlib.import_module(f"quail_engine.sql.dialects.{dialect}").WRAPPERS, shapes,
             module, dialect)
    for dialect, emitter in module.EMIT.items():
        _add(importlib.import_module(f"quail_engine.sql.emit.{dialect}").EMITTERS,
             dict.fromkeys(module.KINDS, emitter), module, dialect)
    if hasattr(module, "NOTES"):
        _add(NOTES, dict.fromkeys(module.KINDS, module.NOTES), module, "notes")
    if hasattr(module, "REFUSAL_NOTE"):
        _add(REFUSAL_NOTES, dict.fromkeys(module.KINDS, module.REFUSAL_NOTE), module,
             "refusal note")


def _add(table: dict, entries: dict, module: ModuleType, where: str) -> None:
    taken = sorted(str(k) for k in set(entries) & set(table))
    if taken:
        raise ImportError(f"{module.__name__}: {where} {taken[0]} is registered twice")
    table.update(entries)


for _info in pkgutil.iter_modules(__path__):
    MODULES[_info.name] = importlib.import_module(f"{__name__}.{_info.name}")
    _merge(MODULES[_info.name])

_owners = [kind for module in MODULES.values() for kind in module.KINDS]
if sorted(_owners) != sorted(OpKind) or any(
        set(m.EMIT) != set(DIALECTS) or set(m.PARSE) != set(DIALECTS) for m in MODULES.values()):
    raise ImportError("every operator kind needs one module in quail_engine.sql.functions, "
                      "with PARSE and EMIT entries for every dialect")
