"""Speed-of-light cost model: pure functions of (model spec, device spec, work counts).

A forward pass has three parts: the linear projections (q, k, v, o), the MLP and attention. Each
part takes max(compute time, memory time) at the device's peak rates; the parts add up. Work is
counted as fresh tokens (run through the weights), attention pairs (query x key positions), KV
writes and KV reads (tokens whose keys/values are stored / loaded). No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    """The shape numbers the cost model needs, read from a model's config.json."""

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    weight_bytes: float = 2.0  # bytes per parameter as stored for compute (bf16 = 2)
    kv_bytes: float = 2.0      # bytes per cached key/value element

    @classmethod
    def from_config(cls, config: dict[str, Any], name: str = "model", weight_bytes: float = 2.0,
                    kv_bytes: float = 2.0) -> ModelSpec:
        """Read the standard Hugging Face fields (a nested `text_config` wins when present)."""
        cfg = dict(config.get("text_config") or config)
        try:
            hidden = int(cfg["hidden_size"])
            heads = int(cfg["num_attention_heads"])
            spec = cls(
                name=name,
                num_layers=int(cfg["num_hidden_layers"]),
                hidden_size=hidden,
                num_heads=heads,
                num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
                head_dim=int(cfg.get("head_dim") or hidden // heads),
                intermediate_size=int(cfg["intermediate_size"]),
                vocab_size=int(cfg.get("vocab_size", 0)),
                weight_bytes=weight_bytes,
                kv_bytes=kv_bytes,
            )
        except KeyError as exc:
            raise ValueError(f"model config lacks field {exc.args[0]!r}") from None
        return spec

    @classmethod
    def from_attrs(cls, cfg: Any, name: str = "model", weight_bytes: float = 2.0) -> ModelSpec:
        """From an object with the same field names (the engine's ModelConfig)."""
        return cls(name, int(cfg.num_layers), int(cfg.hidden_size), int(cfg.num_heads),
                   int(cfg.num_kv_heads), int(cfg.head_dim), int(cfg.intermediate_size),
                   int(getattr(cfg, "vocab_size", 0)), weight_bytes)

    @property
    def attn_params(self) -> int:
        """Parameters of q, k, v and o in one layer."""
        q_o = 2 * self.hidden_size * self.num_heads * self.head_dim
        k_v = 2 * self.hidden_size * self.num_kv_heads * self.head_dim
        return q_o + k_v

    @property
    def mlp_params(self) -> int:
        """Gated MLP (gate, up, down) parameters of one layer."""
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def kv_bytes_per_token(self) -> float:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.kv_bytes


@dataclass(frozen=True)
class DeviceSpec:
    """Peak rates: FLOP/s for the compute dtype and bytes/s of memory bandwidth."""

    name: str
    flops: float
    bandwidth: float


@dataclass(frozen=True)
class Work:
    """Work counts of one operator (or one forward pass)."""

    fresh_tokens: float = 0.0
    attention_pairs: float = 0.0
    kv_writes: float = 0.0
    kv_reads: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.fresh_tokens + other.fresh_tokens,
                    self.attention_pairs + other.attention_pairs,
                    self.kv_writes + other.kv_writes, self.kv_reads + other.kv_reads)

    def scaled(self, factor: float) -> Work:
        return Work(self.fresh_tokens * factor, self.attention_pairs * factor,
                    self.kv_writes * factor, self.kv_reads * factor)

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.fresh_tokens, self.attention_pairs, self.kv_writes, self.kv_reads)


def request_work(prefix_tokens: float, own_tokens: float, prefix_is_new: bool,
                 shared_tokens: float = 0.0) -> Work:
    """Work of one request of `own_tokens` attending to a prefix of `prefix_tokens`.

    A new prefix is computed (its tokens fresh, its own causal pairs, its KV written); the own
    tokens attend to the whole prefix and causally to themselves; their KV is never stored.
    `shared_tokens`: how many of the tokens computed from the start (a new prefix's, or the own
    tokens' when there is no prefix) other rows that begin alike computed already (prefix
    sharing across rows): their KV is read instead (at least one own token is still run).
    """
    p, s = float(prefix_tokens), float(own_tokens)
    own = Work(fresh_tokens=s, attention_pairs=s * p + s * (s + 1) / 2, kv_reads=p)
    work = own
    if prefix_is_new and p > 0:
        work = own + Work(fresh_tokens=p, attention_pairs=p * (p + 1) / 2, kv_writes=p)
    if shared_tokens <= 0 or (p > 0 and not prefix_is_new):
        return work
    h = min(float(shared_tokens), p if p > 0 else max(0.0, s - 1))
    return work + Work(fresh_tokens=-h, attention_pairs=-h * (h + 1) / 2,
                       kv_writes=-h if p > 0 else 0.0, kv_reads=h)


def part_seconds(flops: float, nbytes: float, device: DeviceSpec) -> float:
    """Roofline of one part: compute-bound or memory-bound, whichever is slower."""
    return max(flops / device.flops, nbytes / device.bandwidth)


def seconds(model: ModelSpec, device: DeviceSpec, work: Work, num_passes: float = 1.0) -> float:
    """Speed-of-light seconds for `work` spread over `num_passes` forward passes.

    Weights are read once per pass; activations are ignored (small next to weights and KV).
    """
    t = work.fresh_tokens
    layers = model.num_layers
    proj = part_seconds(2 * t * model.attn_params * layers,
                        num_passes * model.attn_params * layers * model.weight_bytes, device)
    mlp = part_seconds(2 * t * model.mlp_params * layers,
                       num_passes * model.mlp_params * layers * model.weight_bytes, device)
    attn_flops = 4 * work.attention_pairs * model.num_heads * model.head_dim * layers
    kv_bytes = (work.kv_reads + work.kv_writes) * model.kv_bytes_per_token
    attn = part_seconds(attn_flops, kv_bytes, device)
    return proj + mlp + attn


def num_passes(fresh_tokens: float, token_budget: int = 8192) -> float:
    """Forward passes needed to run `fresh_tokens` packed up to `token_budget` per pass."""
    if fresh_tokens <= 0:
        return 0.0
    return float(-(-int(fresh_tokens) // token_budget))
