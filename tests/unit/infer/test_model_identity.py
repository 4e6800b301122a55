"""A model's identity (the key of its cached answers and token ids) follows the bytes of its
files: other weights of the same size with the old modification time set back get a new
identity, and a derived bf16 copy made from other bytes than the current weights is not read."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from quail_engine.exec.answer_cache import AnswerKeys, text_digest
from quail_engine.infer import file_digest
from quail_engine.infer.model_ref import directory_identity
from quail_engine.infer.weights import BF16_SUBDIR, record_copy_source, weights_dir


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path / "cache"))


def _model_dir(path, seed: int):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    gen = torch.Generator().manual_seed(seed)
    save_file({"w": torch.randn(64, 64, generator=gen)}, str(path / "model.safetensors"))
    return path


def _swap_keeping_size_and_mtime(target, source) -> None:
    """Replace `target`'s bytes with `source`'s in place and set its times back."""
    st = target.stat()
    data = source.read_bytes()
    assert len(data) == st.st_size
    with target.open("r+b") as f:
        f.write(data)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_mtime_ns == st.st_mtime_ns


def test_weights_swapped_with_the_same_size_and_mtime_get_a_new_identity(tmp_path):
    model = _model_dir(tmp_path / "model", seed=1)
    other = _model_dir(tmp_path / "other", seed=2)
    before = directory_identity(model)
    assert directory_identity(model) == before  # remembered, unchanged
    _swap_keeping_size_and_mtime(model / "model.safetensors", other / "model.safetensors")
    after = directory_identity(model)
    assert after != before and after == directory_identity(other)
    # the answer cache keys by identity: no answer of the old weights is found for the new
    keys = [AnswerKeys(identity, "readout").key(text_digest("doc"), "question?")
            for identity in (before, after)]
    assert keys[0] != keys[1]


def test_a_digest_is_remembered_for_the_file_it_was_computed_from(tmp_path, monkeypatch):
    path = tmp_path / "w.bin"
    path.write_bytes(b"a" * 1000)
    first = file_digest.content_digest(path)
    opened = []
    real_open = type(path).open

    def counting_open(self, *args, **kwargs):
        if self == path:
            opened.append(self)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(type(path), "open", counting_open)
    assert file_digest.content_digest(path) == first and not opened  # not hashed again
    os.replace(_write(tmp_path / "new.bin", b"b" * 1000), path)  # a new file, same size
    assert file_digest.content_digest(path) != first and opened


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_a_bf16_copy_is_read_only_while_it_matches_the_weights_it_was_made_from(tmp_path):
    model = _model_dir(tmp_path / "model", seed=1)
    other = _model_dir(tmp_path / "other", seed=2)
    copy = model / BF16_SUBDIR
    copy.mkdir()
    state = load_file(str(model / "model.safetensors"))
    save_file({k: v.bfloat16() for k, v in state.items()}, str(copy / "model.safetensors"))
    assert weights_dir(model, torch.bfloat16) == model  # no record of its source: not trusted
    record_copy_source(copy, model / "model.safetensors")
    assert weights_dir(model, torch.bfloat16) == copy
    assert weights_dir(model, torch.float32) == model
    _swap_keeping_size_and_mtime(model / "model.safetensors", other / "model.safetensors")
    assert weights_dir(model, torch.bfloat16) == model


def test_a_piece_digest_hashes_every_piece_and_is_remembered(tmp_path, monkeypatch):
    """piece_digest (a model's identity) is the SHA-256 of its pieces' SHA-256s, read on
    threads: a byte changed in the last piece changes it, and a file hashed once is not read
    again."""
    import hashlib

    monkeypatch.setattr(file_digest, "PIECE", 1000)
    data = bytes(range(256)) * 10  # 2,560 bytes: three pieces, the last one short
    path = _write(tmp_path / "w.safetensors", data)
    pieces = b"".join(hashlib.sha256(data[k:k + 1000]).digest() for k in range(0, 2560, 1000))
    assert file_digest.piece_digest(path) == hashlib.sha256(pieces).hexdigest()
    assert file_digest.piece_digest(path) != file_digest.content_digest(path)
    read = []
    monkeypatch.setattr(file_digest, "_pieces", lambda p: read.append(p) or "x")
    file_digest.piece_digest(path)
    assert not read  # remembered
    os.replace(_write(tmp_path / "new.bin", data[:-1] + b"\x00"), path)
    assert file_digest.piece_digest(path) == "x" and read == [path.resolve()]
