"""GGUF files: dequantize once, cache as a Hugging Face directory, load in about a second.

`convert_gguf(path)` writes `config.json`, `model.safetensors` (float32, HF tensor names, HF
conventions: what CPUs without bf16 dot products compute in), a bfloat16 copy under `bf16/` (for
CUDA and bf16 CPUs: half the bytes to read) and the tokenizer files (built from the file's own
metadata: infer/gguf_tokenizer.py; transformers is not involved) to a folder of the models
cache (settings.cache_path("models")) keyed by the file's content and the converters' versions; the loader then
treats it like any local HF directory. Concurrent first uses are safe: one process converts
(a file lock), into a uniquely named temporary folder renamed into place at the end; the others
wait for it and load its result. A conversion killed midway leaves its temporary folder, which
the next conversion of the same file removes (under the lock, no other process is using it).

Two llama.cpp conventions are undone: Llama-architecture GGUFs store Q/K rows permuted for
llama.cpp's interleaved RoPE (reversed here, as transformers does), and Gemma GGUFs store RMSNorm
weights with the +1 folded in (subtracted here, since our Gemma norm multiplies by 1 + w).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from gguf import MODEL_ARCH_NAMES, GGUFReader, dequantize, get_tensor_name_map
from safetensors.torch import save_file

from quail_engine.errors import ModelError
from quail_engine.infer import fingerprint
from quail_engine.infer.file_digest import content_digest
from quail_engine.infer.gguf_cache import cache_dir_for, file_lock
from quail_engine.infer.gguf_tokenizer import save_tokenizer
from quail_engine.infer.models import build_model, config_from_hf
from quail_engine.infer.tokenizer import load_tokenizer
from quail_engine.infer.weights import BF16_SUBDIR, load_safetensors_model, record_copy_source

logger = logging.getLogger(__name__)
stage = logging.getLogger("quail_engine.stage")

# GGUF architecture -> (HF model_type, {gguf metadata suffix: HF config key}).
_ARCHS = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma3": "gemma3_text"}
_METADATA = {
    "block_count": "num_hidden_layers", "context_length": "max_position_embeddings",
    "embedding_length": "hidden_size", "feed_forward_length": "intermediate_size",
    "attention.head_count": "num_attention_heads", "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim", "rope.freq_base": "rope_theta",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps", "attention.sliding_window": "sliding_window",
    "vocab_size": "vocab_size",
}


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def hf_config_from_gguf(reader) -> dict:
    """A config.json dict equivalent to the GGUF's metadata (transformers' reading of it)."""
    arch = _field(reader, "general.architecture")
    if arch not in _ARCHS:
        raise ModelError(f"GGUF architecture {arch!r} is not supported; supported: {sorted(_ARCHS)}")
    hf: dict = {"model_type": _ARCHS[arch]}
    for suffix, key in _METADATA.items():
        value = _field(reader, f"{arch}.{suffix}")
        if value is not None:
            hf[key] = value
    names = {t.name: t for t in reader.tensors}
    hf.setdefault("vocab_size", int(names["token_embd.weight"].shape[-1]))
    hf["tie_word_embeddings"] = "output.weight" not in names
    scaling = _field(reader, f"{arch}.rope.scaling.type")
    if scaling not in (None, "none"):
        factor = float(_field(reader, f"{arch}.rope.scaling.factor", 1.0))
        hf["rope_scaling"] = {"rope_type": scaling, "factor": factor}
    if "rope_freqs.weight" in names:
        raise ModelError("GGUF with a rope_freqs tensor (Llama 3.1-style RoPE) is not supported")
    for token, key in (("bos", "bos_token_id"), ("eos", "eos_token_id")):
        value = _field(reader, f"tokenizer.ggml.{token}_token_id")
        if value is not None:
            hf[key] = int(value)
    return hf


def _reverse_llama_permute(weights: np.ndarray, num_heads: int) -> np.ndarray:
    """Undo llama.cpp's convert_hf_to_gguf `permute` of Q/K rows (per head: halves interleaved)."""
    dim = weights.shape[0] // num_heads // 2
    w = weights.reshape(num_heads, dim, 2, *weights.shape[1:])
    return w.swapaxes(2, 1).reshape(weights.shape)


def gguf_state_dict(reader, hf: dict) -> dict[str, torch.Tensor]:
    """Dequantized float32 tensors under HF names, llama.cpp conventions undone."""
    config = config_from_hf(hf)
    arch_name = _field(reader, "general.architecture")
    arch = next(a for a, n in MODEL_ARCH_NAMES.items() if n == arch_name)
    name_map = get_tensor_name_map(arch, config.num_layers)
    with torch.device("meta"):
        expected = build_model(config).state_dict()
    to_hf = {}
    for hf_name in expected:
        stem, _, suffix = hf_name.rpartition(".")
        gguf_name = name_map.get_name(stem)
        if gguf_name is not None:
            to_hf[f"{gguf_name}.{suffix}"] = hf_name
    state = {}
    for tensor in reader.tensors:
        if tensor.name not in to_hf:
            logger.info("GGUF tensor %s has no counterpart; skipped", tensor.name)
            continue
        weights = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        if arch_name == "llama" and ".attn_q." in tensor.name:
            weights = _reverse_llama_permute(weights, config.num_heads)
        elif arch_name == "llama" and ".attn_k." in tensor.name:
            weights = _reverse_llama_permute(weights, config.num_kv_heads)
        elif arch_name == "gemma3" and tensor.name.endswith("norm.weight"):
            weights = weights - 1.0
        if not weights.flags.writeable or not weights.flags.c_contiguous:
            weights = weights.copy()
        state[to_hf[tensor.name]] = torch.from_numpy(weights)
    return state


def install_dir(tmp: Path, target: Path) -> None:
    """Rename the finished folder `tmp` to `target`, moving an old `target` aside first (a rename
    onto a non-empty folder fails)."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
        target.rename(old / "dir")
    tmp.rename(target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def convert_gguf(path: str | Path, force: bool = False) -> Path:
    """The cached HF directory for GGUF `path`, converting it first if needed."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"GGUF file {str(path)!r} does not exist")
    target = cache_dir_for(path)
    if (target / "config.json").exists() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / f".{target.name}.lock"):
        if (target / "config.json").exists() and not force:  # converted while we waited
            return target
        _remove_leftovers(target)
        stage.info("converting the model %s (first use, ~30 s)", path.name)
        _convert(path, target)
    return target


def _remove_leftovers(target: Path) -> None:
    """Temporary folders of conversions of `target` that were killed (call under its lock)."""
    prefix = f".{target.name}-"  # mkdtemp's and install_dir's prefixes
    for leftover in target.parent.iterdir():
        if leftover.name.startswith(prefix) and leftover.is_dir():
            logger.info("removing %s, left by an interrupted conversion", leftover)
            shutil.rmtree(leftover, ignore_errors=True)


def _convert(path: Path, target: Path) -> None:
    start = time.perf_counter()
    reader = GGUFReader(str(path))
    hf = hf_config_from_gguf(reader)
    state = gguf_state_dict(reader, hf)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / BF16_SUBDIR).mkdir()
        save_file({k: v.to(torch.bfloat16) for k, v in state.items()},
                  str(tmp / BF16_SUBDIR / "model.safetensors"), metadata={"format": "pt"})
        record_copy_source(tmp / BF16_SUBDIR, tmp / "model.safetensors")
        save_tokenizer(reader, tmp)
        hf["quail_source"] = str(path)
        (tmp / "config.json").write_text(json.dumps(hf, indent=1))
        hf["quail_fingerprint"] = _check_fingerprint(path, tmp, hf)
        (tmp / "config.json").write_text(json.dumps(hf, indent=1))
        install_dir(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("converted %s to %s in %.1f s", path, target, time.perf_counter() - start)


def _check_fingerprint(path: Path, directory: Path, hf: dict) -> str:
    """Hold the converted `directory` to the committed fingerprint of `path`'s bytes, if there
    is one (infer/fingerprint.py): a ModelError, and nothing installed, when it disagrees.
    Returns what config.json records about the check."""
    hf["quail_source_sha256"] = content_digest(path)
    reference = fingerprint.reference_for(hf["quail_source_sha256"])
    if reference is None:
        return "none committed for this file"
    model = load_safetensors_model(directory, config_from_hf(hf), "cpu", torch.float32)
    worst = fingerprint.check(model, load_tokenizer(directory), reference,
                              f"the conversion of {path.name}")
    logger.info("%s matches its fingerprint (largest logit difference %.2g)", path.name, worst)
    return f"matched (largest logit difference {worst:.2g}; {fingerprint.library_versions()})"
