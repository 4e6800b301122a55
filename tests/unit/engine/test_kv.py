"""KV arena: refcounts and byte accounting as the planner sees them."""

import pytest

from quail_engine.errors import ExecutionError
from quail_engine.infer.kv import KVArena


@pytest.mark.parametrize(
    "ops, resident, bytes_in_use",
    [
        ([], True, 100),
        (["release"], False, 0),
        (["retain", "release"], True, 100),
        (["retain", "release", "release"], False, 0),
        (["retain", "retain", "release", "release"], True, 100),
    ],
)
def test_entry_freed_on_last_release(ops, resident, bytes_in_use):
    arena = KVArena()
    entry = arena.add("kv", num_tokens=10, nbytes=100)
    for op in ops:
        getattr(arena, op)(entry)
    assert arena.has(entry) is resident
    assert arena.bytes_in_use == bytes_in_use


def test_bytes_and_peak_across_entries():
    arena = KVArena()
    a = arena.add("a", 1, 300)
    b = arena.add("b", 1, 200)
    assert arena.bytes_in_use == 500 and arena.num_entries == 2
    arena.release(a)
    c = arena.add("c", 1, 50)
    assert arena.bytes_in_use == 250
    assert arena.peak_bytes == 500
    assert arena.get(b) == "b" and arena.get(c) == "c"
    assert len({a, b, c}) == 3


@pytest.mark.parametrize("op", ["retain", "release", "get"])
def test_use_after_free_names_the_entry(op):
    arena = KVArena()
    entry = arena.add("kv", 1, 8)
    arena.release(entry)
    with pytest.raises(ExecutionError, match=f"KV entry {entry} is not resident"):
        getattr(arena, op)(entry)


def test_capacity_is_a_hard_limit():
    arena = KVArena(capacity_bytes=100)
    arena.add("a", 1, 60)
    with pytest.raises(ExecutionError, match="KV arena full: 60 bytes in use \\+ 50"):
        arena.add("b", 1, 50)
    assert arena.bytes_in_use == 60
