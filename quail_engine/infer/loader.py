"""load_model(spec, device, dtype) -> (model, tokenizer, config).

`spec` is one of: "default" / "gemma3-270m" / "smollm2-135m" (the embedded GGUF models), a
path to a .gguf file, a local Hugging Face directory (config.json + *.safetensors), or a hub id
("org/name") already in the local Hugging Face cache (nothing is downloaded). GGUF weights are
converted once into the Quail cache (see infer/gguf.py); later loads read that cache; an FP8
checkpoint as published is dequantized to the compute dtype (infer/weights.py). The
compute dtype follows the device (settings.compute_dtype): bfloat16 on CUDA and on CPUs with bf16
dot products, float32 on other CPUs. A CPU model sizes torch's thread pool before each forward pass
to the cores other processes leave free (infer/threads.py).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch

from quail_engine.errors import ModelError
from quail_engine.infer.config import ModelConfig
from quail_engine.infer.embedded import EMBEDDED, embedded_gguf
from quail_engine.infer.gguf import convert_gguf
from quail_engine.infer.models import CausalLM, config_from_hf
from quail_engine.infer.threads import ThreadGovernor
from quail_engine.infer.tokenizer import Tokenizer, load_tokenizer
from quail_engine.infer.weights import fp8_block_size, load_safetensors_model
from quail_engine.settings import compute_dtype

logger = logging.getLogger(__name__)
stage = logging.getLogger("quail_engine.stage")

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def resolve_dtype(dtype: torch.dtype | str | None,
                  device: str | torch.device | None = None) -> torch.dtype:
    """None means the device's compute dtype (settings.compute_dtype); a None device is taken as
    CUDA (bfloat16)."""
    if dtype is None:
        return _DTYPES[compute_dtype("cuda" if device is None else str(device))]
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in _DTYPES:
        raise ModelError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)}")
    return _DTYPES[dtype]


def _hub_snapshot(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download  # only for a model named by its hub id

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - hub raises several unrelated types here
        raise ModelError(
            f"model {repo_id!r} is neither an embedded model ({', '.join(['default', *EMBEDDED])}), "
            f"a .gguf file, a local directory nor in the local Hugging Face cache; download it "
            f"first: huggingface-cli download {repo_id}") from exc


def resolve_model_dir(spec: str) -> Path:
    """The local HF directory `spec` names, converting GGUF files into the cache."""
    if spec == "default" or spec in EMBEDDED:
        return convert_gguf(embedded_gguf(spec))
    path = Path(spec).expanduser()
    if path.suffix == ".gguf":
        return convert_gguf(path)
    if path.is_dir():
        return _model_dir(path, spec)
    if path.exists() or spec.startswith((".", "/", "~")) or spec.count("/") != 1:
        raise ModelError(f"model {spec!r} is not a .gguf file, a model directory, an embedded "
                         f"model ({', '.join(['default', *EMBEDDED])}) or a hub id")
    return _model_dir(_hub_snapshot(spec), spec)


def _model_dir(path: Path, spec: str) -> Path:
    """A directory with config.json as is; one holding a single .gguf converted."""
    if (path / "config.json").exists():
        return path
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return convert_gguf(ggufs[0])
    raise ModelError(f"directory {spec!r} has no config.json (and not exactly one .gguf)")


def checkpoint_precision(spec: str) -> str:
    """The precision a model is published in: "fp8-block" for an FP8 checkpoint with block
    scales (config.json's quantization_config), "bf16" for anything else (embedded and GGUF
    models, unquantized directories)."""
    if spec == "default" or spec in EMBEDDED or Path(spec).suffix == ".gguf":
        return "bf16"
    return "fp8-block" if fp8_block_size(resolve_model_dir(spec)) else "bf16"


def read_config(directory: Path) -> ModelConfig:
    try:
        hf = json.loads((directory / "config.json").read_text())
        return config_from_hf(hf)
    except (OSError, json.JSONDecodeError, ValueError, KeyError) as exc:
        raise ModelError(f"cannot read the model config in {str(directory)!r}: {exc}") from exc


def load_model(spec: str = "default", device: str | torch.device = "cpu",
               dtype: torch.dtype | str | None = None, tokenizer: Tokenizer | None = None
               ) -> tuple[CausalLM, Tokenizer, ModelConfig]:
    """Load model, tokenizer and config named by `spec` onto `device` in `dtype`. `tokenizer`:
    the model's tokenizer when the caller has loaded it already (it is not read again)."""
    stage.info("loading the model %s", spec)
    start = time.perf_counter()
    directory = resolve_model_dir(spec)
    config = read_config(directory)
    dtype = resolve_dtype(dtype, device)
    model = load_safetensors_model(directory, config, device, dtype)
    governor = ThreadGovernor.for_this_process() if str(device).startswith("cpu") else None
    if governor is not None:  # every pass embeds its tokens first
        model.model.embed_tokens.register_forward_pre_hook(governor)
    if tokenizer is None:
        tokenizer = load_tokenizer(directory)
    logger.info("loaded %s (%s, %d layers, %s) from %s in %.2f s", spec, config.family,
                config.num_layers, str(dtype).removeprefix("torch."), directory,
                time.perf_counter() - start)
    return model, tokenizer, config
