"""Profile fields of `type: quail`: everything dbt-duckdb reads, plus the AI model settings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dbt.adapters.duckdb.credentials import DuckDBCredentials
from dbt_common.exceptions import DbtRuntimeError

from quail_engine.settings import DIALECTS, PRECISIONS

_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_LIMITS = ("max_batch_tokens", "max_context", "max_new_tokens")


@dataclass
class QuailCredentials(DuckDBCredentials):
    """`model`: a Hugging Face directory, a GGUF file or a model name the engine knows; None
    or 'embedded' means the embedded default model. `device`: auto, cpu, cuda or cuda:N.
    `dialect`: the warehouse dialect model SQL is written in unless a model sets `quail_dialect`.
    `cache_dir`: where answers are cached by content across runs (default: the `quail` CLI's
    cache, <cache root>/answers, the root being $QUAIL_CACHE_DIR or ~/.cache/quail); `off`
    disables it. The `max_*` fields bound the engine's batches and outputs.
    `precision`: auto (the float32 decisions wherever a re-ask band is measured, as for the
    embedded models; else the checkpoint's own: fp8-block for a published FP8 checkpoint on a
    cuda device, else bf16), bf16-band / fp8-band / fp8-block-band (close calls asked again in
    float32), bf16, fp8 / fp8-mlp / fp8-block on a cuda device (faster, close calls may differ
    from float32's), or fp32 on the CPU (the reference).
    `generation_model`: the model that writes generated text (auto: the embedded instruct
    model when `model` is the embedded default, else `model`). `workers`, `ray_address`: run
    the model as that many replicas on Ray workers (a local Ray on this host, or the cluster at
    that address; docs/scale-out.md)."""

    model: str | None = None
    device: str = "auto"
    dialect: str = "duckdb"
    cache_dir: str | None = None
    max_batch_tokens: int | None = None
    max_context: int | None = None
    max_new_tokens: int | None = None
    precision: str = "auto"
    generation_model: str = "auto"
    workers: int | None = None
    ray_address: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model is not None and str(self.model).strip().lower() in ("", "embedded"):
            self.model = None
        self.dialect = check_dialect(self.dialect, "profile field 'dialect'")
        if not _DEVICE.match(str(self.device)):
            raise DbtRuntimeError(
                f"profile field 'device' must be auto, cpu, cuda or cuda:N; got {self.device!r}")
        if self.precision not in PRECISIONS:
            raise DbtRuntimeError(f"profile field 'precision' must be one of "
                                  f"{', '.join(PRECISIONS)}; got {self.precision!r}")
        if self.workers is not None and (isinstance(self.workers, bool)
                                         or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise DbtRuntimeError(
                f"profile field 'workers' must be a positive integer; got {self.workers!r}")
        if self.ray_address is not None and not str(self.ray_address).strip():
            self.ray_address = None
        for name in _LIMITS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise DbtRuntimeError(
                    f"profile field {name!r} must be a positive integer; got {value!r}")

    @property
    def type(self) -> str:
        return "quail"

    def engine_options(self) -> dict[str, Any]:
        """The settings that pick and bound the inference engine (one engine per distinct set)."""
        options: dict[str, Any] = {"model": self.model, "device": self.device,
                                   "cache_dir": self.cache_dir, "precision": self.precision,
                                   "generation_model": self.generation_model,
                                   "workers": self.workers, "ray_address": self.ray_address}
        options.update({name: getattr(self, name) for name in _LIMITS})
        return options

    def _connection_keys(self) -> tuple[str, ...]:
        return (*super()._connection_keys(), "model", "device", "dialect", "cache_dir",
                "precision", "generation_model", "workers", "ray_address", *_LIMITS)


def check_dialect(value: Any, where: str) -> str:
    """The dialect name in lower case, or a DbtRuntimeError naming `where` and the bad value."""
    name = str(value).strip().lower()
    if name not in DIALECTS:
        raise DbtRuntimeError(f"{where} must be one of {', '.join(DIALECTS)}; got {value!r}")
    return name
