"""The GPU path's direct loader (infer/gpu/load.py), run on the CPU: every byte lands where the
CPU loader puts it, whatever the chunking; tied heads and vision towers are not read; mismatched
checkpoints are refused like the CPU path refuses them; GGUF specs load through their cache."""

from __future__ import annotations

import json
import random

import pytest
import torch

from quail_engine.errors import ModelError
from quail_engine.infer.gpu.load import (
    TensorEntry,
    checkpoint_entries,
    copy_to_device,
    load_checkpoint,
    plan_chunks,
)
from quail_engine.infer.loader import load_model, read_config
from quail_engine.infer.weights import read_state_dict


def _covered(chunks, entries):
    """{name: bytearray marking each byte written}, checking pieces stay inside their chunk."""
    seen = {e.name: bytearray(e.nbytes) for e in entries}
    by_name = {e.name: e for e in entries}
    for c in chunks:
        for name, at, src, n in c.pieces:
            e = by_name[name]
            assert 0 <= src and src + n <= c.nbytes and n > 0
            assert c.offset + src == e.offset + at  # the bytes read are the tensor's bytes
            for i in range(at, at + n):
                seen[name][i] += 1
    return seen


@pytest.mark.parametrize("chunk_bytes,max_gap", [(7, 0), (64, 3), (1000, 100), (1 << 20, 0)])
def test_chunks_cover_every_byte_once(chunk_bytes, max_gap):
    rng = random.Random(chunk_bytes)
    entries, offset = [], 8
    for i in range(40):
        offset += rng.choice([0, 0, 2, 50])  # tensors skipped by the loader leave gaps
        n = rng.randint(1, 300)
        entries.append(TensorEntry(f"t{i}", i // 20, torch.uint8, (n,), offset, n))
        offset += n
    chunks = plan_chunks(reversed(entries), chunk_bytes, max_gap)
    assert all(c.nbytes <= chunk_bytes for c in chunks)
    assert all(len(set(c.file for c in chunks if any(p[0] == e.name for p in c.pieces))) == 1
               for e in entries)
    assert all(set(marks) == {1} for marks in _covered(chunks, entries).values())


def _entries_and_files(directory):
    config = read_config(directory)
    return config, checkpoint_entries(directory, config)


@pytest.mark.parametrize("chunk_bytes,threads,slots", [(97, 3, 2), (4096, 2, 5), (1 << 26, 1, 1)])
def test_copy_matches_the_cpu_loader(tiny_hf_model, chunk_bytes, threads, slots):
    name, _, directory = tiny_hf_model
    config, (files, entries) = _entries_and_files(directory)
    got = copy_to_device(files, entries, torch.device("cpu"), chunk_bytes, threads, slots)
    want = read_state_dict(directory)
    if config.tie_word_embeddings:
        want.pop("lm_head.weight", None)
    assert set(got) == set(want)
    for key, tensor in want.items():
        assert got[key].dtype == tensor.dtype and torch.equal(got[key], tensor), key


def test_tied_head_and_vision_tower_are_not_read(tmp_path):
    from safetensors.torch import save_file

    hf = {"model_type": "qwen3", "vocab_size": 16, "hidden_size": 8, "intermediate_size": 16,
          "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
          "head_dim": 4, "tie_word_embeddings": True}
    (tmp_path / "config.json").write_text(json.dumps(hf))
    config = read_config(tmp_path)
    from quail_testing.random_weights import random_state_dict

    state = {k.replace("model.", "model.language_model.", 1): v
             for k, v in random_state_dict(config).items()}
    state["lm_head.weight"] = torch.zeros(16, 8)
    state["model.vision_tower.patch.weight"] = torch.zeros(4, 4)
    save_file(state, str(tmp_path / "model.safetensors"))
    files, entries = checkpoint_entries(tmp_path, config)
    names = {e.name for e in entries}
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names
    assert not any("vision" in n or "language_model" in n for n in names)

    del state["model.language_model.layers.0.mlp.up_proj.weight"]
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelError, match="missing.*up_proj"):
        checkpoint_entries(tmp_path, config)


def test_wrong_shape_is_refused(tiny_hf_model, tmp_path):
    from safetensors.torch import load_file, save_file

    _, _, directory = tiny_hf_model
    state = load_file(str(directory / "model.safetensors"))
    state["model.norm.weight"] = torch.ones(5)
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((directory / "config.json").read_text())
    with pytest.raises(ModelError, match="'model.norm.weight' has shape \\(5,\\)"):
        checkpoint_entries(tmp_path, read_config(tmp_path))


def test_a_tokenizer_already_loaded_is_used_not_loaded_again(tiny_hf_model):
    """The tiny directories hold no tokenizer files: loading one there would fail."""
    _, _, directory = tiny_hf_model
    given = object()
    state, tokenizer, _ = load_checkpoint(str(directory), "cpu", "bf16", tokenizer=given)
    assert tokenizer is given and state


@pytest.mark.model
def test_embedded_gguf_loads_like_the_cpu_path(require_embedded):
    """The default spec (a GGUF converted once into the cache) through the direct loader gives
    the CPU loader's bf16 weights bit for bit, and a working tokenizer."""
    require_embedded("default")
    state, tokenizer, config = load_checkpoint("default", "cpu", "bf16", chunk_bytes=3 << 20)
    ref, _, _ = load_model("default", "cpu", torch.bfloat16)
    want = ref.state_dict()
    assert set(want) - {"lm_head.weight"} == set(state)
    for key, tensor in state.items():
        assert tensor.dtype == torch.bfloat16 and torch.equal(tensor, want[key]), key
    assert tokenizer.encode("yes") and config.family == "gemma3"
