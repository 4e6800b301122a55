"""quail_testing.model_dir: the random-weight model directories the GPU benches run take their
tokenizer each time, and refuse one whose ids lie past the model's embedding (on a GPU such an
id is a device-side assert in the first gather, far from its cause)."""

import pytest

from quail_testing.model_dir import prepare_tokenizer, write_model_dir

pytestmark = pytest.mark.model


def test_a_tokenizer_larger_than_the_vocabulary_is_refused_and_a_reused_dir_takes_the_new_one(
        tmp_path):
    gemma = prepare_tokenizer(tmp_path / "tok")  # the default model's: 262,144 tokens
    smollm2 = prepare_tokenizer(tmp_path / "tok-smollm2", "smollm2-135m", gzipped=False)
    assert (smollm2 / "tokenizer.json").is_file()
    model = tmp_path / "model"
    with pytest.raises(ValueError, match="has 262144 tokens, more than the model's vocabulary "
                                         "of 151936"):
        write_model_dir(model, gemma, tiny=True, device="cpu", vocab_size=151936)
    write_model_dir(model, smollm2, tiny=True, device="cpu", vocab_size=151936)
    weights = (model / "model.safetensors").stat().st_mtime_ns
    # the same config again, from a directory with tokenizer.json alone: the weights are
    # reused, the tokenizer files are the new directory's (no config left from the last)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "tokenizer.json").write_bytes((smollm2 / "tokenizer.json").read_bytes())
    write_model_dir(model, tmp_path / "other", tiny=True, device="cpu", vocab_size=151936)
    assert (model / "model.safetensors").stat().st_mtime_ns == weights
    assert not (model / "tokenizer_config.json").exists()
