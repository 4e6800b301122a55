"""A random-weight Qwen3-shaped model directory in Hugging Face layout with a real tokenizer
(the embedded default model's, Gemma 3's vocabulary): what the end-to-end GPU bench, the QUAIL-B
timed table and the QUAIL-B CPU check on surviving rows run, so a model of a real shape is
tested and timed without downloading weights. The tokenizer travels gzipped (to the GPU machine
in .carry/e2e/tok, written on the CPU by `prepare_tokenizer`)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import torch
from tokenizers import Tokenizer

from quail_testing.random_weights import random_state_dict, shape_config

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "chat_template.jinja")
VOCAB = 262144  # the carried tokenizer's (Gemma 3)
TINY = dict(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
            intermediate_size=128, max_position=8192)


def qwen3_4b_config(vocab_size: int, tiny: bool = False) -> dict:
    """config.json of the Qwen3-4B shape (or a tiny one) with the tokenizer's vocabulary."""
    c = shape_config("qwen3-4b", vocab_size=vocab_size, **(TINY if tiny else {}))
    return {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
            "intermediate_size": c.intermediate_size, "num_hidden_layers": c.num_layers,
            "num_attention_heads": c.num_heads, "num_key_value_heads": c.num_kv_heads,
            "head_dim": c.head_dim, "max_position_embeddings": c.max_position,
            "rope_theta": c.rope_theta, "rms_norm_eps": c.rms_norm_eps,
            "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": 1,
            "torch_dtype": "bfloat16"}


def prepare_tokenizer(target: Path, model: str = "default", gzipped: bool = True) -> Path:
    """Copy embedded `model`'s tokenizer files into `target`, gzipped (run on the CPU). The
    decode, grammar and cold-start benches take SmolLM2's, plain (.carry/tok-smollm2): its
    49,152 tokens fit the Qwen3-4B vocabulary (151,936) their random models keep, where the
    default model's (Gemma 3: 262,144) do not."""
    from quail_engine.infer.loader import resolve_model_dir

    source = resolve_model_dir(model)
    target.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            if gzipped:
                with (source / name).open("rb") as src, gzip.open(target / f"{name}.gz",
                                                                  "wb") as dst:
                    shutil.copyfileobj(src, dst)
            else:
                shutil.copyfile(source / name, target / name)
    return target


def write_model_dir(path: Path, tokenizer_dir: Path, tiny: bool, device: str,
                    seed: int = 0, dtype: str = "bfloat16", vocab_size: int = VOCAB) -> dict:
    """config.json + model.safetensors (random weights drawn in float32 on `device`, stored in
    `dtype`: a float32 and a bf16 directory hold the same model) + tokenizer files in `path`
    (gzipped or plain in `tokenizer_dir`; `vocab_size` at least the tokenizer's); its weights
    are reused when its config already matches."""
    from safetensors.torch import save_file

    from quail_engine.infer.models import config_from_hf

    hf = dict(qwen3_4b_config(vocab_size, tiny), torch_dtype=dtype)
    if not any((tokenizer_dir / f"tokenizer.json{gz}").exists() for gz in ("", ".gz")):
        raise FileNotFoundError(f"no tokenizer.json (or .gz) in {tokenizer_dir}: a random-weight "
                                "model directory takes its tokenizer from there")
    path.mkdir(parents=True, exist_ok=True)
    # the tokenizer is written every time, so a directory reused for its weights never keeps
    # another run's tokenizer (whose ids may lie past this embedding: a device-side assert)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / f"{name}.gz").exists():
            (path / name).write_bytes(gzip.open(tokenizer_dir / f"{name}.gz").read())
        elif (tokenizer_dir / name).exists():
            shutil.copyfile(tokenizer_dir / name, path / name)
        else:
            (path / name).unlink(missing_ok=True)
    tokens = Tokenizer.from_file(str(path / "tokenizer.json")).get_vocab_size(True)
    if tokens > vocab_size:
        raise ValueError(f"the tokenizer in {tokenizer_dir} has {tokens} tokens, more than the "
                         f"model's vocabulary of {vocab_size}: pass vocab_size >= {tokens} or a "
                         "smaller tokenizer")
    config_file = path / "config.json"
    if config_file.exists() and json.loads(config_file.read_text()) == hf and \
            (path / "model.safetensors").exists():
        return hf
    state = random_state_dict(config_from_hf(hf), seed=seed, device=device,
                              dtype=getattr(torch, dtype))
    save_file({k: v.cpu() for k, v in state.items()}, str(path / "model.safetensors"),
              metadata={"format": "pt"})
    config_file.write_text(json.dumps(hf, indent=1))
    del state
    if str(device).startswith("cuda"):
        # the caching allocator would keep the weights' blocks for this process while the
        # benches' timed `quail query` processes size their KV arenas from what is free
        torch.cuda.empty_cache()
    return hf
