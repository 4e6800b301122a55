"""The model as a check sees it: resolved, tokenizer read, weight files whole, fingerprint
matched; with `ensure_converted`, the first-use conversion of a GGUF runs in a child process.

The conversion (infer/gguf.py) dequantizes with the gguf library and builds the tokenizer with
the tokenizers library; it runs in a child Python process so that its peak memory (the float32
tensors of the whole model, twice) is returned to the system before dbt goes on.

`describe_model` is what `dbt debug` reports: the model resolves (content identity, config), its
tokenizer.json encodes, its weight files are whole (safetensors headers against file sizes), the
device exists, and a model with a committed fingerprint (the embedded ones) computes it here in
float32 on the CPU (infer/fingerprint.py: the weights are loaded for that and freed; the first
query loads them again for its device).
"""

from __future__ import annotations

import json
import logging
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from quail_engine.errors import ModelError
from quail_engine.infer import fingerprint
from quail_engine.infer.embedded import EMBEDDED, embedded_gguf
from quail_engine.infer.gguf_cache import cache_dir_for
from quail_engine.infer.json_tokenizer import JsonTokenizer
from quail_engine.infer.model_ref import ModelRef
from quail_engine.settings import Device

stage_log = logging.getLogger("quail_engine.stage")
_CONVERTED: set[str] = set()
_CONVERT_LOCK = threading.Lock()
_CHILD = """
import sys
from quail_engine.errors import QuailError
from quail_engine.infer.gguf import convert_gguf
try:
    convert_gguf(sys.argv[1])
except (QuailError, OSError, ValueError) as exc:
    print(" ".join(str(exc).split()), file=sys.stderr)
    sys.exit(2)
"""


def ensure_converted(spec: str) -> None:
    """Convert the GGUF file `spec` names (an embedded model, a .gguf path, a directory holding
    one .gguf) in a child process when its converted copy is not cached yet; anything else is
    left to ModelRef.resolve, which then converts nothing. Checked once per spec and process."""
    with _CONVERT_LOCK:
        if spec in _CONVERTED:
            return
        source = _unconverted_gguf(spec)
        if source is not None:
            _convert_in_child(spec, source)
        _CONVERTED.add(spec)


def _unconverted_gguf(spec: str) -> Path | None:
    """The GGUF file behind `spec` when it still needs converting (mirrors
    infer/loader.resolve_model_dir's choice of a GGUF), else None."""

    if spec == "default" or spec in EMBEDDED:
        path: Path | None = embedded_gguf(spec)
    else:
        path = Path(spec).expanduser()
        if path.is_dir() and not (path / "config.json").exists():
            found = sorted(path.glob("*.gguf"))
            path = found[0] if len(found) == 1 else None
        elif path.suffix != ".gguf":
            path = None
    if path is None or not path.is_file():
        return None  # not a GGUF, or missing: ModelRef.resolve says why
    return None if (cache_dir_for(path) / "config.json").exists() else path


def _convert_in_child(spec: str, source: Path) -> None:
    stage_log.info("converting the model %s (%s) on first use, ~30 s", spec, source.name)
    done = subprocess.run([sys.executable, "-c", _CHILD, str(source)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        raise ModelError(f"converting {str(source)!r} failed: {lines[-1][:300]}")


def describe_model(spec: str | None, device: str) -> list[str]:
    """Two lines about the model `spec` on `device` (family, size, identity, folder; tokenizer,
    weights, device); a QuailError naming the problem when something is missing or broken."""
    spec = spec or "default"
    ensure_converted(spec)
    ref = ModelRef.resolve(spec)
    config = ref.config()
    tokenizer = _tokenizer_line(ref.directory)
    weights = _weights_line(ref.directory)
    _check_device(device)
    return [
        f"model {spec}: {config.family}, {config.num_layers} layers, vocabulary "
        f"{config.vocab_size:,}, identity {ref.identity[:12]}, in {ref.directory}",
        f"model {spec}: {tokenizer}; {weights}; device {device}",
        f"model {spec}: {_fingerprint_line(ref.directory)}",
    ]


def _fingerprint_line(directory: Path) -> str:
    """The committed fingerprint of the GGUF the model was converted from, recomputed here in
    float32 on the CPU (a ModelError when it differs); models without one are said to have
    none."""
    from quail_engine.infer.loader import load_model  # torch

    source = json.loads((directory / "config.json").read_text()).get("quail_source_sha256")
    reference = fingerprint.reference_for(source) if source else None
    if reference is None:
        return "no committed fingerprint (only the embedded models have one)"
    model, tokenizer, _ = load_model(str(directory), "cpu", "float32")
    worst = fingerprint.check(model, tokenizer, reference, f"the model in {directory}")
    return (f"fingerprint matches ({len(reference['rows'])} prompts in float32, largest logit "
            f"difference {worst:.2g})")


def _tokenizer_line(directory: Path) -> str:
    try:
        tokenizer = JsonTokenizer.load(directory)
    except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception on bad JSON
        raise ModelError(f"tokenizer.json in {str(directory)!r} cannot be read: {exc}") from exc
    if tokenizer is None:
        if any((directory / name).exists() for name in ("tokenizer.model", "vocab.json")):
            return "tokenizer without tokenizer.json (read through transformers when it runs)"
        raise ModelError(f"no tokenizer in {str(directory)!r}")
    ids = tokenizer.encode("dbt debug checks the tokenizer")
    if not ids:
        raise ModelError(f"the tokenizer in {str(directory)!r} encodes text to no tokens")
    template = "chat template" if tokenizer.chat_template else "no chat template"
    return f"tokenizer.json reads ({len(tokenizer):,} tokens, {template})"


def _weights_line(directory: Path) -> str:
    """Every *.safetensors file's header parses and its tensors end where the file does."""
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ModelError(f"no *.safetensors weights in {str(directory)!r}")
    tensors = 0
    for path in files:
        tensors += _safetensors_tensors(path)
    size = sum(p.stat().st_size for p in files)
    plural = "s" if len(files) > 1 else ""
    return (f"weights {len(files)} safetensors file{plural}, {tensors} tensors, "
            f"{size / 1e6:,.0f} MB, intact")


def _safetensors_tensors(path: Path) -> int:
    size = path.stat().st_size
    with path.open("rb") as handle:
        raw = handle.read(8)
        length = struct.unpack("<Q", raw)[0] if len(raw) == 8 else -1
        if length < 0 or 8 + length > size:
            raise ModelError(f"{str(path)!r} is not a safetensors file (truncated header)")
        try:
            header: dict[str, Any] = json.loads(handle.read(length))
        except ValueError as exc:
            raise ModelError(f"{str(path)!r} has a corrupt safetensors header") from exc
    header.pop("__metadata__", None)
    end = max((t["data_offsets"][1] for t in header.values()), default=0)
    if 8 + length + end != size:
        raise ModelError(f"{str(path)!r} is truncated or padded: its tensors end at byte "
                         f"{8 + length + end:,}, the file has {size:,}")
    return len(header)


def _check_device(spec: str) -> None:
    device = Device.resolve(spec)
    if not device.is_cuda:
        return
    import torch  # only to count a machine's GPUs

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.name.partition(":")[2] or 0)
    if index >= count:
        raise ModelError(f"device {device} is not available (this machine has {count} CUDA "
                         "device(s)); set device: cpu or auto in the profile")
