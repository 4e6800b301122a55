"""SessionConfig: everything that picks the model, the device and the caches of a session.

The CLI builds one from its arguments, the dbt adapter from its profile; the executor reads
nothing else (no argparse Namespace, no profile object below this line).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quail_engine.errors import QuailError
from quail_engine.settings import DEFAULT_PRECISION, Precision, cache_path, resolve_device


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
    address; docs/scale-out.md); neither set: one engine in this process, Ray never imported."""

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

    @property
    def engine_device(self) -> str:
        """The device the engine loads on: `auto` resolved, `cuda` as `cuda:0`."""
        device = resolve_device(self.device)
        return "cuda:0" if device == "cuda" else device

    @property
    def decode_model(self) -> str:
        """The model that writes generative operators' text (the session's model unless
        `generation_model` names another, or the embedded default gives way to the embedded
        instruct model)."""
        from quail_engine.infer.embedded import decode_model_for

        return decode_model_for(self.model, self.generation_model)

    @property
    def context_limit(self) -> int | None:
        """The tokens a prompt may hold: `max_context` when set, else the embedded models' own
        limit (infer.embedded.EMBEDDED_CONTEXT) for them, else the model's context (None)."""
        from quail_engine.infer.embedded import EMBEDDED_CONTEXT, is_embedded

        if self.max_context:
            return self.max_context
        return EMBEDDED_CONTEXT if is_embedded(self.model) else None

    @property
    def limits_variant(self) -> str:
        """Text appended to the model's identity when limits change its answers."""
        limits = (self.context_limit, self.max_new_tokens)
        return f"|limits={limits}" if any(limits) else ""
