"""Weights: read a Hugging Face safetensors directory (one file or sharded) into a CausalLM.

The model is built on the meta device and the checkpoint tensors are assigned in place, so a
load costs one read of the file (memory-mapped) plus the dtype cast. Tied embeddings share the
embedding matrix; a checkpoint's redundant `lm_head.weight` is then ignored.

FP8 checkpoints as published (config.json `quantization_config`: {"quant_method": "fp8",
"weight_block_size": [128, 128], ...}; each quantized Linear as a float8_e4m3fn `weight` and a
float32 `weight_scale_inv` [cdiv(N, 128), cdiv(K, 128)] that its blocks are multiplied by) are
dequantized here for the plain-torch path; the GPU path reads them as they are (gpu/load.py).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from safetensors.torch import load_file

from quail_engine.errors import ModelError
from quail_engine.infer.config import ModelConfig
from quail_engine.infer.file_digest import content_digest
from quail_engine.infer.models import CausalLM, build_model

logger = logging.getLogger(__name__)

# Multimodal / wrapper checkpoints nest the text model; map their names onto ours.
_PREFIX_RENAMES = (("model.language_model.", "model."), ("language_model.model.", "model."),
                   ("language_model.lm_head.", "lm_head."))
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)
# A converted cache directory may hold a bfloat16 copy of its weights here (see infer/gguf.py).
BF16_SUBDIR = "bf16"
_IGNORED_PREFIXES = ("vision_tower.", "model.vision_tower.", "multi_modal_projector.",
                     "model.multi_modal_projector.")
SCALE_SUFFIX = "_scale_inv"  # `<linear>.weight_scale_inv` beside `<linear>.weight`
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def fp8_block_size(directory: str | Path) -> tuple[int, int] | None:
    """(rows, cols) of the weight blocks of an FP8 checkpoint (its config.json's
    `quantization_config`), None for an unquantized one; ModelError for quantization schemes
    this engine does not read."""
    try:
        hf = json.loads((Path(directory) / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    quant = hf.get("quantization_config") or hf.get("text_config", {}).get("quantization_config")
    if not quant:
        return None
    method = quant.get("quant_method")
    block = quant.get("weight_block_size")
    if method != "fp8" or not block or len(block) != 2:
        raise ModelError(f"the checkpoint in {str(directory)!r} is quantized as "
                         f"{method!r} (weight_block_size {block}); only block-scaled fp8 "
                         f"checkpoints (quant_method fp8 with weight_block_size) are read")
    if quant.get("activation_scheme", "dynamic") != "dynamic":
        raise ModelError(f"the FP8 checkpoint in {str(directory)!r} has static activation "
                         f"scales ({quant['activation_scheme']!r}); only dynamic ones are read")
    return int(block[0]), int(block[1])


def dequantize_blocks(w: torch.Tensor, scale: torch.Tensor, block: tuple[int, int] = (128, 128),
                      dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A block-scaled fp8 weight [N, K] times its scale [cdiv(N, rows), cdiv(K, cols)] (a
    checkpoint's `weight_scale_inv`), in `dtype`."""
    n, k = w.shape
    full = scale.float().repeat_interleave(block[0], 0)[:n].repeat_interleave(block[1], 1)[:, :k]
    return (w.float() * full).to(dtype)


def dequantize_state(state: dict[str, torch.Tensor],
                     block: tuple[int, int]) -> dict[str, torch.Tensor]:
    """`state` with every fp8 weight and its `weight_scale_inv` replaced by the float32 weight."""
    out = {}
    for name, t in state.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = state.get(name + SCALE_SUFFIX)
        if t.dtype in FP8_DTYPES:
            if scale is None:
                raise ModelError(f"fp8 tensor {name!r} has no {name + SCALE_SUFFIX!r}")
            t = dequantize_blocks(t, scale, block)
        out[name] = t
    return out


def safetensors_files(directory: Path) -> list[Path]:
    """The checkpoint's .safetensors files, in shard order."""
    index = directory / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return [directory / name for name in sorted(set(weight_map.values()))]
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ModelError(f"no .safetensors weights in {str(directory)!r}")
    return files


def read_state_dict(directory: str | Path) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under the models' names; FP8 blocks dequantized to float32."""
    directory = Path(directory)
    state: dict[str, torch.Tensor] = {}
    for path in safetensors_files(directory):
        for name, tensor in load_file(str(path)).items():
            for old, new in _PREFIX_RENAMES:
                if name.startswith(old):
                    name = new + name[len(old):]
            if not name.endswith(_IGNORED_SUFFIXES) and not name.startswith(_IGNORED_PREFIXES):
                state[name] = tensor
    block = fp8_block_size(directory)
    return dequantize_state(state, block) if block else state


def model_from_state_dict(config: ModelConfig, state: dict[str, torch.Tensor],
                          device: str | torch.device = "cpu",
                          dtype: torch.dtype = torch.float32) -> CausalLM:
    """Build the family's model and assign `state` (HF names) to it, cast to device/dtype."""
    with torch.device("meta"):
        model = build_model(config)
    expected = set(model.state_dict())
    if config.tie_word_embeddings:
        expected.discard("lm_head.weight")
        state = {k: v for k, v in state.items() if k != "lm_head.weight"}
    missing = sorted(expected - set(state))
    unexpected = sorted(set(state) - expected)
    if missing or unexpected:
        raise ModelError(f"checkpoint does not match the {config.family} architecture: "
                         f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, tensor in state.items():
        want = model.get_parameter(name).shape
        if tensor.shape != want:
            raise ModelError(f"weight {name!r} has shape {tuple(tensor.shape)}, config expects "
                             f"{tuple(want)}")
    state = {k: v.to(device=device, dtype=dtype) for k, v in state.items()}
    model.load_state_dict(state, strict=False, assign=True)
    model.tie_weights()
    return model.eval().requires_grad_(False)


COPY_SOURCE = "source.json"  # in a derived copy's folder: the digest of the file it was made from


def record_copy_source(copy_dir: Path, source: Path) -> None:
    """Note in `copy_dir` (a derived copy, e.g. bf16/) which bytes of `source` it was made
    from, so `weights_dir` uses it only while `source` is unchanged."""
    (copy_dir / COPY_SOURCE).write_text(json.dumps({source.name: content_digest(source)}))


def weights_dir(directory: Path, dtype: torch.dtype) -> Path:
    """Where to read `dtype` weights from: a converted model's bf16 copy when there is one made
    from the directory's current model.safetensors (half the bytes of its float32 file), else
    the directory itself. A copy made from other bytes (the top-level file replaced since) is
    never read: its answers would be the old model's under the new model's identity."""
    copy = directory / BF16_SUBDIR
    if dtype != torch.bfloat16 or not (copy / "model.safetensors").exists():
        return directory
    source = directory / "model.safetensors"
    try:
        recorded = json.loads((copy / COPY_SOURCE).read_text())
        if source.exists() and recorded.get(source.name) == content_digest(source):
            return copy
    except (OSError, ValueError, AttributeError):
        pass
    logger.warning("%s was not made from %s as it is now; reading %s instead", copy, source,
                   source)
    return directory


def load_safetensors_model(directory: str | Path, config: ModelConfig,
                           device: str | torch.device = "cpu",
                           dtype: torch.dtype = torch.float32) -> CausalLM:
    directory = weights_dir(Path(directory), dtype)
    state = read_state_dict(directory)
    logger.info("read %d tensors from %s", len(state), directory)
    return model_from_state_dict(config, state, device, dtype)
