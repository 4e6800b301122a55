"""A GGUF file's tokenizer, built from its own metadata with the `tokenizers` library.

transformers' GGUF support rebuilds the tokenizer too, but what it builds has changed between
releases (the same Gemma-3 file became a Unigram model without its BOS under 5.17 and a
byte-fallback BPE under 5.24), so a conversion made with it depends on the installed
transformers. This module writes the tokenizer from the file's fields alone, following the
meaning llama.cpp (the format's reference reader) gives them:

- `tokenizer.ggml.model == "llama"`: a SentencePiece BPE vocabulary. SentencePiece merges the
  adjacent pair whose result has the best score; its pieces are stored best first, so a BPE
  whose merge rank is the merged piece's id, with byte fallback and spaces written as U+2581,
  encodes the same. User-defined pieces that contain no space (newline runs, tabs, HTML tags)
  are matched whole before the model, as SentencePiece does; those with spaces are ordinary
  pieces once spaces become U+2581.
- `tokenizer.ggml.model == "gpt2"`: a byte-level BPE with the file's merges, split into words
  by the pre-tokenizer `tokenizer.ggml.pre` names (each one's expression as llama.cpp applies
  it). A name this module does not know is refused rather than guessed.

Control tokens become special added tokens; the model's BOS/EOS flags become the
post-processor; the chat template, if any, is written beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    normalizers,
    pre_tokenizers,
    processors,
)
from tokenizers.models import BPE

from quail_engine.errors import ModelError

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"

_GPT2_WORDS = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_WORDS = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                 r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                 r"|\s+(?!\S)|\s+")
_QWEN2_WORDS = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
                r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
                r"|\s+(?!\S)|\s+")
# tokenizer.ggml.pre -> (split digits one by one first, word expression; None = GPT-2's own)
_BPE_PRE = {
    "default": (False, None), "gpt2": (False, None), "mpt": (False, None),
    "olmo": (False, None),
    "smollm": (True, None), "starcoder": (True, None), "refact": (True, None),
    "codeshell": (True, None),
    "llama-bpe": (False, _LLAMA3_WORDS), "llama3": (False, _LLAMA3_WORDS),
    "dbrx": (False, _LLAMA3_WORDS), "smaug-bpe": (False, _LLAMA3_WORDS),
    "qwen2": (False, _QWEN2_WORDS), "stablelm2": (False, _QWEN2_WORDS),
}
_SPECIAL_IDS = {"bos_token": "bos_token_id", "eos_token": "eos_token_id",
                "unk_token": "unknown_token_id", "pad_token": "padding_token_id"}


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def build_tokenizer(reader):
    """(tokenizers.Tokenizer, tokenizer_config dict, chat template or None) for a GGUFReader."""
    kind = _field(reader, "tokenizer.ggml.model")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    if kind is None or tokens is None:
        raise ModelError("the GGUF file has no tokenizer (tokenizer.ggml.model/tokens missing)")
    types = _field(reader, "tokenizer.ggml.token_type") or [NORMAL] * len(tokens)
    if kind == "llama":
        tokenizer = _sentencepiece_bpe(reader, tokens, types)
    elif kind == "gpt2":
        tokenizer = _byte_level_bpe(reader, tokens, types)
    else:
        raise ModelError(f"GGUF tokenizer model {kind!r} is not supported (supported: 'llama' "
                         "SentencePiece BPE, 'gpt2' byte-level BPE)")
    _add_special_tokens(tokenizer, tokens, types, kind)
    _set_post_processor(reader, tokenizer, tokens)
    config = {"tokenizer_class": "PreTrainedTokenizerFast",
              "clean_up_tokenization_spaces": False}
    for name, field in _SPECIAL_IDS.items():
        token_id = _field(reader, f"tokenizer.ggml.{field}")
        if token_id is not None and 0 <= int(token_id) < len(tokens):
            config[name] = tokens[int(token_id)]
    return tokenizer, config, _field(reader, "tokenizer.chat_template")


def save_tokenizer(reader, directory: Path) -> None:
    """tokenizer.json, tokenizer_config.json and, with a template, chat_template.jinja."""
    tokenizer, config, template = build_tokenizer(reader)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    if template:
        (directory / "chat_template.jinja").write_text(template)


def _sentencepiece_bpe(reader, tokens: list[str], types: list[int]):

    # spaces inside user-defined pieces are U+2581 once the text is normalized
    pieces = [t.replace(" ", SPACE) if types[i] == USER_DEFINED else t
              for i, t in enumerate(tokens)]
    vocab = {}
    for i, piece in enumerate(pieces):
        vocab.setdefault(piece, i)
    merges = []
    for i, piece in enumerate(pieces):  # SentencePiece stores pieces best score first
        if types[i] not in (NORMAL, USER_DEFINED) or vocab[piece] != i:
            continue
        for cut in range(len(piece) - 1, 0, -1):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                merges.append((left, right))
    unk_id = _field(reader, "tokenizer.ggml.unknown_token_id")
    unk = tokens[int(unk_id)] if unk_id is not None else None
    tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True,
                              byte_fallback=True))
    steps = [normalizers.Replace(" ", SPACE)]
    decode = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if _field(reader, "tokenizer.ggml.add_space_prefix", True):
        steps.insert(0, normalizers.Prepend(SPACE))
        decode.append(decoders.Strip(" ", 1, 0))
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.decoder = decoders.Sequence(decode)
    return tokenizer


def _byte_level_bpe(reader, tokens: list[str], types: list[int]):

    pre = _field(reader, "tokenizer.ggml.pre", "default")
    if pre not in _BPE_PRE:
        raise ModelError(f"GGUF pre-tokenizer {pre!r} is not supported (supported: "
                         f"{', '.join(sorted(_BPE_PRE))}); its words would be split wrongly")
    merges_field = _field(reader, "tokenizer.ggml.merges")
    if not merges_field:
        raise ModelError("the GGUF file's byte-level BPE tokenizer has no merges")
    vocab = {}
    for i, token in enumerate(tokens):
        vocab.setdefault(token, i)
    merges = [tuple(m.split(" ", 1)) for m in merges_field]
    tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    digits, words = _BPE_PRE[pre]
    steps = [pre_tokenizers.Digits(individual_digits=True)] if digits else []
    if words is None:
        steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    else:
        steps += [pre_tokenizers.Split(Regex(words), behavior="isolated"),
                  pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    tokenizer.pre_tokenizer = steps[0] if len(steps) == 1 else pre_tokenizers.Sequence(steps)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _add_special_tokens(tokenizer, tokens: list[str], types: list[int], kind: str) -> None:
    """Control tokens as special added tokens; user-defined ones as plain added tokens, matched
    whole before the model (in a SentencePiece vocabulary, those with a space excepted: the
    normalizer has replaced every space before they could match)."""

    special, plain = [], []
    for token, kind_of in zip(tokens, types):
        if kind_of == CONTROL:
            special.append(AddedToken(token, normalized=False, special=True))
        elif kind_of == USER_DEFINED and not (kind == "llama" and " " in token):
            plain.append(AddedToken(token, normalized=False, special=False))
    tokenizer.add_special_tokens(special)
    tokenizer.add_tokens(plain)


def _set_post_processor(reader, tokenizer, tokens: list[str]) -> None:
    """The BOS/EOS the model's flags add around each sequence (the pair form as HF writes it)."""

    bos = eos = None
    if _field(reader, "tokenizer.ggml.add_bos_token", False):
        bos = int(_field(reader, "tokenizer.ggml.bos_token_id"))
    if _field(reader, "tokenizer.ggml.add_eos_token", False):
        eos = int(_field(reader, "tokenizer.ggml.eos_token_id"))
    first = [tokens[bos]] if bos is not None else []
    last = [tokens[eos]] if eos is not None else []
    single = " ".join([*first, "$A", *last])
    pair = " ".join([*first, "$A", *(f"{t}:1" for t in first), "$B:1", *(f"{t}:1" for t in last)])
    used = {tokens[i]: i for i in (bos, eos) if i is not None}
    tokenizer.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=list(used.items()))
