"""One cache layout (<root>/models, answers, probe) whether or not QUAIL_CACHE_DIR is set, and
first uses that race: two processes (here threads) converting into an empty cache at once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from quail_engine.exec import default_cache_dir
from quail_engine.infer import embedded, gguf, gguf_cache
from quail_engine.plan import device


@pytest.mark.parametrize("env", [None, "set"])
def test_every_reader_uses_one_layout(env, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if env:
        monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path / "cache"))
    else:
        monkeypatch.delenv("QUAIL_CACHE_DIR", raising=False)
    root = tmp_path / "cache" if env else tmp_path / "home" / ".cache" / "quail"
    assert gguf_cache.cache_root() == root / "models"
    assert default_cache_dir() == root / "answers"
    monkeypatch.setattr(device, "probe_cpu", lambda dtype: device.DeviceSpec("cpu", 1, 1))
    device.measured_cpu("float32")
    assert [p.parent for p in root.rglob("*.json")] == [root / "probe"]


def _race(target, count: int = 2) -> list:
    """Call `target` from `count` threads released together; their results or exceptions."""
    barrier, results = threading.Barrier(count), [None] * count

    def run(i):
        barrier.wait()
        try:
            results[i] = target()
        except Exception as exc:  # noqa: BLE001 - the test reports it
            results[i] = exc
    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.model
def test_two_first_uses_reassemble_gemma_at_once(tmp_path, monkeypatch, require_embedded):
    require_embedded("gemma3-270m")
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path))
    results = _race(embedded.gemma3_270m_gguf)
    assert results == [tmp_path / "models" / "gemma-3-270m-q4_k_m.gguf"] * 2
    assert embedded._sha256(results[0]) == embedded.GEMMA_SHA256
    assert [p.name for p in (tmp_path / "models").iterdir()] == [results[0].name]


@pytest.mark.model
def test_two_first_uses_convert_into_models_at_once(tmp_path, monkeypatch, require_embedded):
    from quail_engine.infer.loader import load_model

    path = require_embedded("smollm2-135m")
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path))
    calls = []
    convert = gguf._convert
    monkeypatch.setattr(gguf, "_convert", lambda *a: calls.append(a) or convert(*a))
    results = _race(lambda: gguf.convert_gguf(path))
    assert results[0] == results[1] == gguf_cache.cache_dir_for(path)
    assert results[0].parent == tmp_path / "models"
    assert len(calls) == 1  # the second waited for the first instead of converting again
    leftovers = [p.name for p in (tmp_path / "models").iterdir()
                 if p != results[0] and not p.name.endswith(".lock")]
    assert leftovers == []
    _, tokenizer, config = load_model(str(path))
    assert config.num_layers == 30 and tokenizer.encode_batch(["hi"])[0]
    assert {p.name for p in tmp_path.iterdir()} == {"models", "digests"}


def test_force_reconvert_replaces_a_finished_folder(tmp_path):
    target = tmp_path / "m"
    target.mkdir()
    (target / "config.json").write_text("old")
    tmp = tmp_path / ".m-new"
    tmp.mkdir()
    (tmp / "config.json").write_text("new")
    gguf.install_dir(tmp, target)
    assert (target / "config.json").read_text() == "new"
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["m"]


def test_a_reinstalled_file_reuses_its_conversion_and_other_content_does_not(tmp_path,
                                                                            monkeypatch):
    """The conversion folder is named by content, not by modification time: the same GGUF
    installed again (a fresh virtual environment: same bytes, new mtime) finds the folder its
    earlier install converted into; a file of the same name and size with other bytes anywhere
    (its middle too, which a sample of its ends would miss) does not."""
    import os

    monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path / "cache"))
    size = 3 * (1 << 20) + 5
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    first, again = tmp_path / "a" / "m.gguf", tmp_path / "b" / "m.gguf"
    for path in (first, again):
        path.parent.mkdir()
        path.write_bytes(data)
    os.utime(again, ns=(1, 1))
    assert gguf_cache.cache_dir_for(first) == gguf_cache.cache_dir_for(again)
    variants = []
    for name, at in (("c", size - 1), ("d", 0), ("e", size // 2)):
        path = tmp_path / name / "m.gguf"
        path.parent.mkdir()
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
        variants.append(path)
    assert len({gguf_cache.cache_dir_for(p) for p in (first, *variants)}) == 4


def test_the_conversion_folder_names_the_converters_versions(tmp_path, monkeypatch):
    """Another gguf or tokenizers may convert differently: its conversion is its own (and
    transformers, which no longer converts anything, does not split the cache)."""
    versions = gguf_cache.converter_versions()
    assert "gguf==" in versions and "tokenizers==" in versions
    assert "transformers" not in versions
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + bytes(100))
    before = gguf_cache.cache_dir_for(path)
    monkeypatch.setattr(gguf_cache, "converter_versions", lambda: "gguf==0.0 tokenizers==0.0")
    assert gguf_cache.cache_dir_for(path) != before
