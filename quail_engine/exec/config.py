"""SessionConfig: everything that picks the model, the device and the caches of a session.

The CLI builds one from its arguments, the dbt adapter from its profile; the executor reads
nothing else (no argparse Namespace, no profile object below this line).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from quail_engine.errors import QuailError
from quail_engine.infer.embedded import EMBEDDED_CONTEXT, decode_model_for, is_embedded
from quail_engine.infer.factory import resolve_precision
from quail_engine.settings import DEFAULT_PRECISION, Device, Precision, cache_path


def default_cache_dir() -> Path:
    """The answer cache when none is given: <cache root>/answers."""
    return cache_path("answers")


@dataclass(frozen=True)
class SessionConfig:
    """`model`: default | an embedded name | a .gguf file | a model directory. `device`: auto,
    cpu, cuda or cuda:N. `precision`: settings.Precision (the fp8 ones on a cuda device, fp32
    on the CPU).
    `cache_dir`: the answer cache (None: `default_cache_dir()`); `use_cache=False` neither
    reads nor writes cached answers or token ids. `on_long`: a document longer than the
    model's context is cut ("truncate") or refused ("error"). `progress`: show the progress
    display on stderr. `max_*`: bounds on the engine's batches, context and generated answers
    (None: the engine's own). `convert_in_child`: convert a GGUF model on first use in a child
    process (dbt: its process never imports transformers). `workers`, `ray_address`: run the
    engine as that many replicas on Ray (a local instance on this host, or the cluster at that
    address; docs/scale-out.md); neither set: one engine in this process, Ray never imported.
    How statements run: `plan=False` runs them as written (AI calls evaluated where DuckDB
    evaluates them, no precompute); `share_kv=False` encodes every prompt in full (the bench's
    baseline); `sample_size`: rows sampled per filter and join for selectivity; `calibrate`:
    calibrated yes/no thresholds; `batch_size`: rows per engine call at most; `queries_only`:
    statements other than queries are refused.

    `engine_device` and `answer_precision` are resolved on first use and kept: one config, one
    resolution (open_session asks both when the session opens)."""

    model: str = "default"
    device: str = "auto"
    precision: Precision = DEFAULT_PRECISION
    cache_dir: str | Path | None = None
    use_cache: bool = True
    on_long: str = "truncate"
    progress: bool = False
    max_batch_tokens: int | None = None
    max_context: int | None = None
    max_new_tokens: int | None = None
    convert_in_child: bool = False
    workers: int | None = None
    ray_address: str | None = None
    generation_model: str = "auto"  # writes generated text; "auto": infer.embedded.decode_model_for
    plan: bool = True
    share_kv: bool = True
    sample_size: int = 8
    calibrate: bool = True
    batch_size: int = 65536
    queries_only: bool = False

    def __post_init__(self) -> None:
        if self.workers is not None and (isinstance(self.workers, bool)
                                         or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise QuailError(f"workers must be a positive integer; got {self.workers!r}")

    @property
    def is_distributed(self) -> bool:
        """The engine runs on Ray workers (`workers` or `ray_address` set)."""
        return bool(self.workers or self.ray_address)

    @property
    def answers_dir(self) -> Path | None:
        """The answer cache folder, None when caching is off."""
        if not self.use_cache:
            return None
        return Path(self.cache_dir) if self.cache_dir is not None else default_cache_dir()

    @property
    def tokens_dir(self) -> Path | None:
        """The token store's folder, None when caching is off."""
        return cache_path("tokens") if self.use_cache else None

    @cached_property
    def engine_device(self) -> Device:
        """The device the engine loads on: `auto` resolved, `cuda` as `cuda:0`."""
        return Device.resolve(self.device)

    @cached_property
    def answer_precision(self) -> Precision:
        """The precision the engine will run in (`auto` resolved: the checkpoint's own on a GPU,
        bf16-band or fp32 on the CPU: infer/factory.resolve_precision), without loading
        weights: the answers' identity in the cache and the peak the cost model uses (an FP8
        checkpoint's fp8-block answers are not its CPU answers)."""
        return resolve_precision(self.model, self.engine_device, self.precision)

    @property
    def decode_model(self) -> str:
        """The model that writes generative operators' text (the session's model unless
        `generation_model` names another, or the embedded default gives way to the embedded
        instruct model)."""
        return decode_model_for(self.model, self.generation_model)

    @property
    def context_limit(self) -> int | None:
        """The tokens a prompt may hold: `max_context` when set, else the embedded models' own
        limit (infer.embedded.EMBEDDED_CONTEXT) for them, else the model's context (None)."""
        if self.max_context:
            return self.max_context
        return EMBEDDED_CONTEXT if is_embedded(self.model) else None

    @property
    def limits_variant(self) -> str:
        """Text appended to the model's identity when limits change its answers."""
        limits = (self.context_limit, self.max_new_tokens)
        return f"|limits={limits}" if any(limits) else ""
