"""ModelRef: a model named by the user, resolved to its files without reading any weights.

`identity` names the model by content, not by the name typed: a hash of config.json and the
names and content digests of its tokenizer and weight files (a converted GGUF's cache folder is
itself named by the source file's content digest and the converters' versions). Two folders
holding different models never share an identity, so answers and token ids cached under it
cannot leak between them. `codec()` loads only the tokenizer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from quail_engine.infer.file_digest import piece_digest
from quail_engine.infer.textio import TextCodec
from quail_engine.infer.tokenizer import load_tokenizer

_WEIGHT_SUFFIXES = (".safetensors", ".json", ".model", ".txt", ".bin")


@dataclass(frozen=True)
class ModelRef:
    spec: str
    directory: Path
    identity: str

    @classmethod
    def resolve(cls, spec: str) -> ModelRef:
        """The model `spec` names (see infer/loader.py); a GGUF file is converted once here."""
        from quail_engine.infer.loader import resolve_model_dir  # torch: the loader's module

        directory = resolve_model_dir(spec)
        return cls(spec, directory, directory_identity(directory))

    def config(self):
        from quail_engine.infer.loader import read_config  # torch, as above

        return read_config(self.directory)

    def codec(self):
        """The model's TextCodec (tokenizer and chat layout), no weights."""
        from quail_engine.infer.loader import read_config  # torch, as above

        return TextCodec(load_tokenizer(self.directory), read_config(self.directory))


def directory_identity(directory: Path) -> str:
    """A hash of config.json and the names and content digests (infer/file_digest.py's
    piece_digest: a multi-gigabyte checkpoint hashed on several threads) of the
    model's files. Not sub-folders: a derived dtype copy there (bf16/) is read only while it
    matches the file it was made from (infer/weights.weights_dir)."""
    digest = hashlib.sha256()
    config = directory / "config.json"
    digest.update(config.read_bytes() if config.exists() else b"")
    for path in sorted(directory.iterdir()):
        if path.is_file() and path.suffix in _WEIGHT_SUFFIXES:
            digest.update(json.dumps([path.name, piece_digest(path)]).encode())
    return digest.hexdigest()[:32]
