"""FP8 checkpoints as published (config.json quantization_config with weight_block_size, fp8
weights beside `weight_scale_inv`): the CPU path loads them dequantized and answers; the GPU
path's loader keeps their fp8 bytes; `--precision` defaults to the checkpoint's own."""

from __future__ import annotations

import json

import pytest
import torch

from quail_engine.errors import ModelError, QuailError
from quail_engine.infer import factory
from quail_engine.infer.config import ModelConfig
from quail_engine.infer.engine import LocalEngine
from quail_testing.fp8_checkpoint import write_fp8_checkpoint

# K and N of 256/320: whole and partial 128-blocks (the scale grid rounds up)
CONFIG = ModelConfig(family="qwen3", vocab_size=128, hidden_size=256, num_layers=2, num_heads=4,
                     num_kv_heads=2, head_dim=64, intermediate_size=320, qk_norm=True,
                     tie_word_embeddings=True, rope_theta=1e6, max_position=512)


@pytest.fixture(scope="module")
def fp8_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("qwen3_fp8")
    return directory, write_fp8_checkpoint(directory, CONFIG, seed=4)


def _dequantized(state: dict) -> dict:
    """The checkpoint's weights in float32, by a route of its own (Kronecker-expanded scales)."""
    out = {}
    for name, t in state.items():
        if name.endswith("_scale_inv"):
            continue
        scale = state.get(name + "_scale_inv")
        if scale is None:
            out[name] = t.float()
        else:
            n, k = t.shape
            out[name] = t.float() * torch.kron(scale, torch.ones(128, 128))[:n, :k]
    return out


def test_the_checkpoint_is_in_the_published_format(fp8_checkpoint):
    directory, state = fp8_checkpoint
    hf = json.loads((directory / "config.json").read_text())
    assert hf["quantization_config"] == {"activation_scheme": "dynamic", "fmt": "e4m3",
                                         "quant_method": "fp8", "weight_block_size": [128, 128]}
    assert state["model.layers.0.mlp.down_proj.weight"].dtype == torch.float8_e4m3fn
    assert state["model.layers.0.mlp.down_proj.weight_scale_inv"].shape == (2, 3)  # 256 x 320
    assert state["model.layers.0.input_layernorm.weight"].dtype == torch.bfloat16


def test_cpu_path_dequantizes_and_answers_like_the_dequantized_weights(fp8_checkpoint):
    from quail_engine.infer.models import build_model
    from quail_testing.ask import ask_boolean

    directory, state = fp8_checkpoint
    engine = factory.load_engine(str(directory), "cpu")  # precision auto: dequantized here
    ref = build_model(CONFIG)
    ref.load_state_dict(_dequantized(state), strict=False)
    ref.tie_weights()
    ref = ref.to(next(engine.model.parameters()).dtype).eval()  # the CPU's compute dtype
    ids = torch.tensor(engine.codec.tokenizer.encode("is this review positive? a fine film."))
    cu = torch.tensor([0, len(ids)], dtype=torch.int32)
    args = (ids, torch.arange(len(ids)), cu, [None], torch.tensor([len(ids) - 1]))
    with torch.inference_mode():
        got = engine.model.logits(engine.model.forward(*args)[0])
        want = ref.logits(ref.forward(*args)[0])
    assert float((got.float() - want.float()).norm() / want.float().norm()) < 1e-3
    answers = ask_boolean(engine, ["a fine film.", "a dull film, sadly."], "Is it positive?")
    assert [type(a.value) for a in answers] == [bool, bool]


def test_gpu_loader_keeps_the_fp8_blocks_as_published(fp8_checkpoint):
    from quail_engine.infer.gpu.load import load_checkpoint

    directory, state = fp8_checkpoint
    loaded, _, config = load_checkpoint(str(directory), "cpu", torch.float32)
    name = "model.layers.1.self_attn.k_proj.weight"
    assert loaded[name].dtype == torch.float8_e4m3fn
    assert torch.equal(loaded[name].view(torch.uint8), state[name].view(torch.uint8))
    assert torch.equal(loaded[name + "_scale_inv"], state[name + "_scale_inv"])
    assert loaded["model.norm.weight"].dtype == torch.float32  # the rest in the compute dtype


def test_precision_defaults_to_the_checkpoints_own(fp8_checkpoint, monkeypatch, tmp_path):
    pytest.importorskip("quail_engine.infer.gpu.engine")
    from quail_engine.infer.gpu.engine import GpuEngine

    directory, _ = fp8_checkpoint
    seen = []
    monkeypatch.setattr(GpuEngine, "load", classmethod(
        lambda cls, spec, device, **kw: seen.append(kw) or "gpu"))
    assert factory.load_engine(str(directory), "cuda:0") == "gpu"
    assert seen == [{"fp8": True, "fp8_block": True}]
    assert factory.resolve_precision(str(directory), "cuda:0", "bf16") == "bf16"
    # no band is measured for this checkpoint: auto on a CPU is float32 itself; the embedded
    # default has a bf16 band on cuda (infer/bands.json)
    assert factory.resolve_precision(str(directory), "cpu", "auto") == "fp32"
    assert factory.resolve_precision("default", "cuda:0", "auto") == "bf16-band"
    with pytest.raises(QuailError, match="'fp8-block' runs only on the GPU path"):
        factory.load_engine(str(directory), "cpu", precision="fp8-block")


def test_other_quantization_schemes_are_refused_in_one_line(fp8_checkpoint, tmp_path):
    import shutil

    directory, _ = fp8_checkpoint
    for f in directory.iterdir():
        shutil.copy(f, tmp_path / f.name)
    hf = json.loads((tmp_path / "config.json").read_text())
    hf["quantization_config"] = {"quant_method": "gptq", "bits": 4}
    (tmp_path / "config.json").write_text(json.dumps(hf))
    with pytest.raises(ModelError, match="quantized as 'gptq'"):
        LocalEngine.load(str(tmp_path), "cpu")
