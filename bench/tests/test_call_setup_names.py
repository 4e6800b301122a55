"""bench/probes/call_setup.py times the executor's calls by patching them by name: a name the
code no longer has (a function moved to another module) breaks the probe only when it next
runs on the GPU, so every timed name must exist where the table says."""

from __future__ import annotations

import importlib

import pytest

from bench.probes.call_setup import TIMED


@pytest.mark.parametrize("module,owner,attr", [(m, o, a) for m, items in TIMED.items()
                                               for o, a in items])
def test_every_timed_call_exists_where_the_probe_patches_it(module, owner, attr):
    mod = importlib.import_module(module)
    assert hasattr(getattr(mod, owner) if owner else mod, attr), (module, owner, attr)
