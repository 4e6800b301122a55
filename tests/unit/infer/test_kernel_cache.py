"""Compiled GPU kernels are kept under the quail cache root (infer/gpu/compile_log.py): Triton's
cache directory is the root's kernels/ unless TRITON_CACHE_DIR names another, and the cache's
inventory counts its kernel variants (one folder each) and bytes."""

from pathlib import Path

from quail_engine.infer.gpu import compile_log
from quail_engine.settings import cache_path


def test_triton_keeps_its_kernels_under_the_quail_cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    assert compile_log.use_cache_dir() == cache_path("kernels") == tmp_path / "kernels"
    from triton import knobs

    assert Path(knobs.cache.dir) == tmp_path / "kernels"  # what Triton reads at a compilation


def test_a_cache_directory_the_user_set_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "mine"))
    assert compile_log.use_cache_dir() == tmp_path / "mine"


def test_the_inventory_counts_kernel_folders_and_their_bytes(tmp_path):
    for name, size in (("AAA", 10), ("BBB", 5)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "k.cubin").write_bytes(b"x" * size)
    (tmp_path / "stray.lock").write_text("")
    assert compile_log.cache_inventory(tmp_path) == {"dir": str(tmp_path), "kernels": 2,
                                                     "bytes": 15}
    assert compile_log.cache_inventory(tmp_path / "none")["kernels"] == 0
