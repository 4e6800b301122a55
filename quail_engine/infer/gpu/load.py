"""Load a Hugging Face safetensors checkpoint straight onto the GPU, for GpuEngine.

The CPU path (infer/loader.load_model) builds the whole CausalLM in host memory, in the model
dtype, before the GPU model copies it over. Here the files' bytes go page cache -> pinned
staging slots (reader threads, `os.preadv` of fixed-size chunks) -> device tensors (copies
issued without blocking, one CUDA event per slot before it is refilled); nothing else is built
on the host, and casting (a float32 checkpoint to bf16) and fp8 quantization run on the GPU.
Tensors the GPU model never reads (a tied `lm_head.weight`, a vision tower) are not read at
all. A published FP8 checkpoint's fp8 weights and their `weight_scale_inv` keep their dtypes
(GpuLinear uses them as they are, or dequantizes them for a bf16 / per-channel run). Names and shapes are checked against the family's model built on the meta device, as the
CPU path checks them; the tokenizer loads in a thread beside the weights.

A .safetensors file: 8 bytes little-endian header length N, N bytes of JSON {name: {dtype,
shape, data_offsets: [begin, end]}} (offsets relative to the data after the header).
"""

from __future__ import annotations

import json
import logging
import os
import struct
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch

from quail_engine.errors import ModelError
from quail_engine.infer import weights
from quail_engine.infer.loader import read_config, resolve_dtype, resolve_model_dir
from quail_engine.infer.models import build_model
from quail_engine.infer.tokenizer import load_tokenizer
from quail_engine.infer.weights import (
    FP8_DTYPES,
    SCALE_SUFFIX,
    fp8_block_size,
    safetensors_files,
    weights_dir,
)

log = logging.getLogger(__name__)

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
          "BF16": torch.bfloat16, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
          "U8": torch.uint8, "BOOL": torch.bool}
CHUNK_BYTES = 32 << 20  # per read; bench/gpu/load_check.py measures the load rate it gives
MAX_GAP = 1 << 20  # unread bytes a chunk may read through rather than start a new one


@dataclass(frozen=True)
class TensorEntry:
    name: str       # HF name after renames (see hf_name)
    file: int       # index into the checkpoint's file list
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int     # absolute byte offset in its file
    nbytes: int


@dataclass
class Chunk:
    """One read: `nbytes` from `offset` of file `file`; pieces (name, dst byte offset, byte
    offset in the chunk, nbytes) say where its bytes go."""

    file: int
    offset: int
    nbytes: int = 0
    pieces: list[tuple[str, int, int, int]] = field(default_factory=list)


def read_header(path: Path, file: int = 0) -> list[TensorEntry]:
    """The tensors of one .safetensors file, names as stored."""
    with open(path, "rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise ModelError(f"{str(path)!r} is not a safetensors file (too short)")
        (length,) = struct.unpack("<Q", raw)
        try:
            header = json.loads(handle.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelError(f"{str(path)!r} has an unreadable safetensors header: {exc}") from exc
    entries = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] not in DTYPES:
            raise ModelError(f"tensor {name!r} in {str(path)!r} has dtype {meta['dtype']}, "
                             f"which the GPU loader does not read")
        begin, end = meta["data_offsets"]
        entries.append(TensorEntry(name, file, DTYPES[meta["dtype"]], tuple(meta["shape"]),
                                   8 + length + begin, end - begin))
    return entries


def hf_name(name: str) -> str | None:
    """The name the models use (wrapper prefixes renamed), None for tensors nobody reads; the
    same rules as infer/weights.read_state_dict."""
    for old, new in weights._PREFIX_RENAMES:
        if name.startswith(old):
            name = new + name[len(old):]
    if name.endswith(weights._IGNORED_SUFFIXES) or name.startswith(weights._IGNORED_PREFIXES):
        return None
    return name


def plan_chunks(entries: Iterable[TensorEntry], chunk_bytes: int = CHUNK_BYTES,
                max_gap: int = MAX_GAP) -> list[Chunk]:
    """Reads of at most `chunk_bytes` covering every entry's bytes, in file order; a tensor
    larger than a chunk spans several, and a chunk reads through gaps up to `max_gap`."""
    chunks: list[Chunk] = []
    for e in sorted(entries, key=lambda e: (e.file, e.offset)):
        done = 0
        while done < e.nbytes:
            start = e.offset + done
            last = chunks[-1] if chunks else None
            gap = start - (last.offset + last.nbytes) if last else -1
            if last is None or last.file != e.file or not 0 <= gap <= max_gap or \
                    last.nbytes + gap >= chunk_bytes:
                last = Chunk(e.file, start)
                chunks.append(last)
                gap = 0
            take = min(e.nbytes - done, chunk_bytes - last.nbytes - gap)
            last.pieces.append((e.name, done, last.nbytes + gap, take))
            last.nbytes += gap + take
            done += take
    return chunks


def _read_into(fd: int, buffer: memoryview, offset: int) -> None:
    got = 0
    while got < len(buffer):
        n = os.preadv(fd, [buffer[got:]], offset + got)
        if n <= 0:
            raise ModelError(f"checkpoint file ended {len(buffer) - got} bytes early")
        got += n


class _Slot:
    def __init__(self, host: torch.Tensor):
        self.host = host
        self.view = memoryview(host.numpy())
        self.event = None

    def wait(self) -> None:
        if self.event is not None:
            self.event.synchronize()
            self.event = None


def copy_to_device(files: Sequence[Path], entries: Sequence[TensorEntry], device: torch.device,
                   chunk_bytes: int = CHUNK_BYTES, threads: int | None = None,
                   slots: int | None = None) -> dict[str, torch.Tensor]:
    """{name: tensor on `device`, in its file dtype} for `entries`, read through pinned slots
    (plain host buffers when `device` is the CPU)."""
    cuda = device.type == "cuda"
    threads = threads or max(1, min(16, os.cpu_count() or 1))
    slots = slots or 2 * threads
    out = {e.name: torch.empty(e.shape, dtype=e.dtype, device=device) for e in entries}
    dst = {name: t.view(-1).view(torch.uint8) for name, t in out.items()}
    chunks = plan_chunks(entries, chunk_bytes)
    size = min(chunk_bytes, max((c.nbytes for c in chunks), default=1))
    slots = max(1, min(slots, len(chunks)))
    host = torch.empty(slots * size, dtype=torch.uint8, pin_memory=cuda)
    ring = [_Slot(host[i * size:(i + 1) * size]) for i in range(slots)]
    fds = [os.open(f, os.O_RDONLY) for f in files]
    pending: deque = deque()

    def issue(chunk: Chunk, slot: _Slot, future) -> None:
        future.result()
        for name, at, src, n in chunk.pieces:
            dst[name][at:at + n].copy_(slot.host[src:src + n], non_blocking=cuda)
        if cuda:
            slot.event = torch.cuda.Event()
            slot.event.record()

    try:
        with torch.cuda.device(device) if cuda else nullcontext(), \
                ThreadPoolExecutor(threads, thread_name_prefix="quail-load") as pool:
            for i, chunk in enumerate(chunks):
                if len(pending) == len(ring):
                    issue(*pending.popleft())
                slot = ring[i % len(ring)]
                slot.wait()
                pending.append((chunk, slot, pool.submit(
                    _read_into, fds[chunk.file], slot.view[:chunk.nbytes], chunk.offset)))
            while pending:
                issue(*pending.popleft())
            if cuda:
                torch.cuda.current_stream().synchronize()
    finally:
        for fd in fds:
            os.close(fd)
    return out


def checkpoint_entries(directory: Path, config) -> tuple[list[Path], list[TensorEntry]]:
    """The checkpoint's files and the tensors the model reads, checked against the family's
    parameter names and shapes (ModelError otherwise, like the CPU path); an FP8 checkpoint's
    `weight_scale_inv` entries are checked against their weights' block grid."""
    files = safetensors_files(directory)
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in build_model(config).state_dict().items()}
    if config.tie_word_embeddings:
        expected.pop("lm_head.weight", None)
    block = fp8_block_size(directory)
    if block:
        expected.update({name + SCALE_SUFFIX: (-(-shape[0] // block[0]), -(-shape[1] // block[1]))
                         for name, shape in list(expected.items()) if len(shape) == 2})
    entries = {}
    for i, path in enumerate(files):
        for e in read_header(path, i):
            name = hf_name(e.name)
            if name is None or (name == "lm_head.weight" and config.tie_word_embeddings):
                continue
            entries[name] = TensorEntry(name, e.file, e.dtype, e.shape, e.offset, e.nbytes)
    missing = sorted(set(expected) - set(entries) - {n for n in expected
                                                     if n.endswith(SCALE_SUFFIX)})
    unexpected = sorted(set(entries) - set(expected))
    if missing or unexpected:
        raise ModelError(f"checkpoint does not match the {config.family} architecture: "
                         f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, e in entries.items():
        if e.shape != expected[name]:
            raise ModelError(f"weight {name!r} has shape {e.shape}, config expects "
                             f"{expected[name]}")
        if e.dtype in FP8_DTYPES and name + SCALE_SUFFIX not in entries:
            raise ModelError(f"fp8 weight {name!r} has no {name + SCALE_SUFFIX!r} (is "
                             f"config.json's quantization_config missing?)")
    return files, list(entries.values())


def _tokenizer(directory: Path):
    return load_tokenizer(directory)


def load_checkpoint(spec: str, device: torch.device | str = "cuda",
                    dtype: torch.dtype | str | None = None, tokenizer=None, **copy_options):
    """(state dict on `device` in `dtype` (None: bf16), tokenizer, ModelConfig) for a model
    spec (infer/loader.py: embedded names, .gguf files, HF directories, cached hub ids).
    `tokenizer`: one the caller already loaded for this model (once the weights stream, its
    load is most of the time left), else it loads beside the weights."""
    start = time.perf_counter()
    device, dtype = torch.device(device), resolve_dtype(dtype)
    directory = resolve_model_dir(spec)
    config = read_config(directory)
    with ThreadPoolExecutor(1, thread_name_prefix="quail-tokenizer") as pool:
        pending = pool.submit(_tokenizer, directory) if tokenizer is None else None
        files, entries = checkpoint_entries(weights_dir(directory, dtype), config)
        read_start = time.perf_counter()
        state = copy_to_device(files, entries, device, **copy_options)
        read_s = time.perf_counter() - read_start
        for name, t in state.items():
            if t.is_floating_point() and t.dtype not in (dtype, *FP8_DTYPES) and \
                    not name.endswith(SCALE_SUFFIX):
                state[name] = t.to(dtype)
        tokenizer = pending.result() if pending is not None else tokenizer
    nbytes = sum(e.nbytes for e in entries)
    log.info("loaded %s (%s, %d layers): %.2f GB onto %s in %.2f s (%.1f GB/s), %.2f s in all",
             spec, config.family, config.num_layers, nbytes / 1e9, device, read_s,
             nbytes / 1e9 / max(read_s, 1e-9), time.perf_counter() - start)
    return state, tokenizer, config
