"""A random-weight FP8 checkpoint written as published FP8 checkpoints are (e.g. Qwen/Qwen3-4B-FP8):
config.json with `quantization_config` {"activation_scheme": "dynamic", "fmt": "e4m3",
"quant_method": "fp8", "weight_block_size": [128, 128]}; model.safetensors with every layer
projection as a float8_e4m3fn `<name>.weight` beside a float32 `<name>.weight_scale_inv`
[cdiv(N, 128), cdiv(K, 128)] (what each 128 x 128 block is multiplied by), everything else
(embeddings, norms, lm_head) in bfloat16; and a character-level tokenizer.json so the engine can
answer text prompts. The tests load it on both paths; the GPU device check writes one of the
Qwen3-4B shape.

    python -m quail_testing.fp8_checkpoint DIR [--shape qwen3-4b]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from quail_engine.infer.config import ModelConfig
from quail_kernels.block_fp8_gemm import quantize_blocks_ref
from quail_testing.random_weights import random_state_dict, shape_config

QUANTIZATION_CONFIG = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                       "weight_block_size": [128, 128]}
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
_ARCH = {"qwen3": ("Qwen3ForCausalLM", "qwen3"), "llama": ("LlamaForCausalLM", "llama")}
CHARS = " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:;!?'\"-()\n"


def hf_config(config: ModelConfig) -> dict:
    """config.json fields of a Qwen3 or Llama checkpoint, with the FP8 quantization_config."""
    if config.family not in _ARCH:
        raise ValueError(f"FP8 checkpoints are written for {sorted(_ARCH)}, not {config.family}")
    arch, model_type = _ARCH[config.family]
    return {"architectures": [arch], "model_type": model_type, "attention_bias": False,
            "hidden_act": "silu", "hidden_size": config.hidden_size,
            "intermediate_size": config.intermediate_size,
            "num_hidden_layers": config.num_layers, "num_attention_heads": config.num_heads,
            "num_key_value_heads": config.num_kv_heads, "head_dim": config.head_dim,
            "max_position_embeddings": config.max_position, "rms_norm_eps": config.rms_norm_eps,
            "rope_theta": config.rope_theta, "rope_scaling": None,
            "tie_word_embeddings": config.tie_word_embeddings, "vocab_size": config.vocab_size,
            "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
            "quantization_config": dict(QUANTIZATION_CONFIG)}


def fp8_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Layer projections as fp8 blocks + weight_scale_inv, the rest in bfloat16."""
    out = {}
    for name, t in state.items():
        if name.endswith(tuple(f"{p}.weight" for p in PROJECTIONS)):
            out[name], out[name + "_scale_inv"] = quantize_blocks_ref(t)
        else:
            out[name] = t.to(torch.bfloat16).contiguous()
    return out


def write_tokenizer(directory: Path) -> None:
    """One token per character of CHARS (ids 3..), <unk>/<s>/</s> as 0/1/2; no chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({c: i + 3 for i, c in enumerate(CHARS)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
         "clean_up_tokenization_spaces": False}))


def write_fp8_checkpoint(directory: str | Path, config: ModelConfig, seed: int = 0,
                         std: float = 0.05, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Writes the checkpoint of `config` (random N(0, std) weights, drawn and quantized on
    `device`) to `directory`; returns the tensors as written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {name: t.cpu() for name, t in fp8_state_dict(
        random_state_dict(config, seed=seed, std=std, device=device)).items()}
    save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(hf_config(config), indent=2))
    write_tokenizer(directory)
    return state


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory")
    ap.add_argument("--shape", default="qwen3-4b")
    ap.add_argument("--vocab-size", type=int, default=None)
    ap.add_argument("--device", default="cpu", help="where the weights are drawn and quantized")
    args = ap.parse_args(argv)
    overrides = {"vocab_size": args.vocab_size} if args.vocab_size else {}
    write_fp8_checkpoint(args.directory, shape_config(args.shape, **overrides),
                         device=args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
