"""LocalEngine: the Engine protocol (api.py) on a local model, CPU or GPU.

`run` sorts requests by readout: boolean/score/single-step label requests prefill together (one
read per request, trimmed LM head), colliding labels are scored by teacher forcing, generate
requests decode greedily. Calibration references are computed once per distinct content-free
prompt and cached. Rows that start from scratch and prefixes added without a parent share
their beginnings by content through `prefix_cache` (infer/prefix_cache.py; None when
QUAIL_PREFIX_SHARING=0): one-step readouts only (span, teacher-forced and generate requests
run whole). Its parts: scoring (infer/engine_scoring.py), generation (engine_generation.py)
and prefix sharing (engine_sharing.py).
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Sequence
from typing import Any

import torch

from quail_engine.errors import ExecutionError
from quail_engine.infer.api import (
    Answer,
    EngineStats,
    GenerateReadout,
    LabelReadout,
    PrefixHandle,
    Request,
    SpanReadout,
)
from quail_engine.infer.engine_generation import Generation
from quail_engine.infer.engine_scoring import Scoring
from quail_engine.infer.engine_sharing import PrefixSharing
from quail_engine.infer.kv import KVArena
from quail_engine.infer.labels import label_answers, score_labels
from quail_engine.infer.loader import load_model
from quail_engine.infer.runner import Runner, SeqJob
from quail_engine.infer.scheduler import Scheduler
from quail_engine.infer.textio import TextCodec
from quail_engine.settings import prefix_sharing_enabled


class LocalEngine(PrefixSharing, Scoring, Generation):
    """Runs requests on `model` (the CausalLM contract of infer/models/base.py)."""

    def __init__(self, model: Any, tokenizer: Any, config: Any = None, model_id: str = "local",
                 device: str | torch.device = "cpu", token_budget: int = 2048,
                 max_seqs: int = 256, kv_capacity_bytes: int | None = None,
                 prefix_sharing: bool | None = None):
        self.model = model
        self.config = config
        self.model_id = model_id
        self.max_context = int(getattr(config, "max_position", 0) or 8192)
        self.stats = EngineStats()
        self.arena = KVArena(kv_capacity_bytes)
        self.codec = TextCodec(tokenizer, config)
        self.runner = Runner(model, Scheduler(token_budget, max_seqs), self.stats, device)
        self._references: dict[tuple, torch.Tensor] = {}
        self._token_sets: dict[tuple, Any] = {}
        self._grammars = None  # grammar.GrammarMasks, made for the first constrained answer
        # generated answers carry their steps' smallest margin (set by a re-ask band that
        # measured one for decoding: infer/reask.py)
        self.track_decode_margins = False
        if prefix_sharing is None:
            prefix_sharing = prefix_sharing_enabled()
        self.prefix_cache = self._prefix_cache() if prefix_sharing else None
        self._pinned: dict[int, list] = {}  # arena entry -> radix nodes its prefix holds
        # decoding sequences' KV (weakly) and the cached pages it begins with (_decode_prefill)
        self._decode_holds: list[tuple[weakref.ref, tuple]] = []
        # the decode room when the last generating batch began (Generation.decode_capacity)
        self._decode_room_start: tuple[int, int] | None = None
        # the next generating call's requests, offered from the host's thread, and what the
        # last call started of them (Generation.offer)
        self._offer_lock = threading.Lock()
        self._offered: list[Request] = []
        self._carry = None
        self._started: dict[Request, deque] = {}
        self._streamed = False  # whether the running call did either

    @classmethod
    def load(cls, spec: str = "default", device: str = "cpu", dtype: Any = None,
             tokenizer: Any = None, **kwargs: Any) -> LocalEngine:
        """Load a model (see infer/loader.py for the specs) and wrap it. `tokenizer`: the
        model's tokenizer, when the caller has it loaded already."""
        model, tokenizer, config = load_model(spec, device, dtype, tokenizer)
        return cls(model, tokenizer, config, model_id=spec, device=device, **kwargs)

    # -- text ---------------------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return self.codec.encode_batch(texts)

    def chat_split(self, prefix_text: str, suffix_text: str) -> tuple[list[int], list[int]]:
        return self.codec.chat_split(prefix_text, suffix_text)

    # -- prefixes -----------------------------------------------------------------------------
    def add_prefix(self, tokens: Sequence[int], parent: PrefixHandle | None = None) -> PrefixHandle:
        """Compute and keep the KV of `tokens` (after `parent`'s, when given); one reference."""
        return self.add_prefixes([tokens], parent)[0]

    def add_prefixes(self, token_lists: Sequence[Sequence[int]],
                     parent: PrefixHandle | None = None) -> list[PrefixHandle]:
        """Several prefixes in as few forward passes as the token budget allows."""
        if any(not t for t in token_lists):
            raise ExecutionError("a prefix needs at least one token")
        cache = self.prefix_cache if parent is None else None
        base = self.arena.get(parent.id) if parent is not None else None
        jobs = self._shared_jobs([list(t) for t in token_lists], cache, base, read=(),
                                 store_kv=True)
        handles = []
        try:
            self.runner.run(jobs)
            for tokens, job in zip(token_lists, jobs):
                entry = self.arena.add(job.kv, job.kv.num_tokens, int(job.kv.nbytes))
                if cache is not None:  # its pages are shared by content, pinned while it lives
                    self._pinned[entry] = cache.insert(list(tokens), job.kv)
                    cache.index.retain(self._pinned[entry])
                handles.append(PrefixHandle(entry, job.kv.num_tokens))
        finally:
            self._end_batch(cache)
        self.stats.prefixes_resident = self.arena.num_entries
        return handles

    extends_prefixes = True  # a wrapper forwards this, so it tells what the engine under it can

    def cached_tokens(self, token_lists: Sequence[Sequence[int]]) -> list[int]:
        """How many leading tokens of each list the prefix cache holds (0 without prefix
        sharing), those pages marked used: the executor runs such rows first, before new
        sequences evict them."""
        index = self.prefix_cache.index if self.prefix_cache is not None else None
        if index is None:
            return [0] * len(token_lists)
        return [chain[-1].num_tokens if (chain := index.match(t)) else 0 for t in token_lists]

    def extend_prefixes(self, handles: Sequence[PrefixHandle], tokens: Sequence[int]
                        ) -> list[PrefixHandle]:
        """For each resident prefix, a new one holding its tokens followed by `tokens` (the
        same for all: a question's common start after each of a join's carried documents),
        computed in as few passes as the token budget allows; the originals stay held."""
        if not tokens:
            raise ExecutionError("a prefix extension needs at least one token")
        jobs = [SeqJob(tokens=list(tokens), prefix=self.arena.get(h.id), read=(),
                       store_kv=True) for h in handles]
        self.runner.run(jobs)
        out = [PrefixHandle(self.arena.add(job.kv, job.kv.num_tokens, int(job.kv.nbytes)),
                            job.kv.num_tokens) for job in jobs]
        self.stats.prefixes_resident = self.arena.num_entries
        return out

    def retain(self, handle: PrefixHandle) -> None:
        self.arena.retain(handle.id)

    def release(self, handle: PrefixHandle) -> None:
        if self.arena.release(handle.id) and handle.id in self._pinned:
            self.prefix_cache.index.release(self._pinned.pop(handle.id))
        self.stats.prefixes_resident = self.arena.num_entries

    # -- interrupting -------------------------------------------------------------------------
    def interrupt(self) -> None:
        """Stop the running call at its next forward pass or layer (it raises Interrupted),
        and every call after it until `resume`."""
        self.runner.stop.set()

    def resume(self) -> None:
        self.runner.stop.clear()

    # -- requests -----------------------------------------------------------------------------
    def run(self, requests: Sequence[Request]) -> list[Answer]:
        """Answers of `requests`. Tokens the engine runs beyond the requests' own (calibration
        and span references, teacher-forced label tokens) count as requested too, so a call
        never reports more fresh tokens than requested ones. (Not a generating call that
        started another call's answers or went on with those the last one started:
        Generation.offer; its fresh tokens are partly another call's prompts.)"""
        fresh0, requested0 = self.stats.fresh_tokens, self.stats.requested_tokens
        self._streamed = False
        answers = self._run(requests)
        if not self._streamed:
            extra = (self.stats.fresh_tokens - fresh0) - (self.stats.requested_tokens
                                                          - requested0)
            self.stats.requested_tokens += max(0, extra)
        return answers

    def _run(self, requests: Sequence[Request]) -> list[Answer]:
        prefixes = [self.arena.get(r.prefix.id) if r.prefix else None for r in requests]
        for r in requests:
            self._check_length(r)
        for r in requests:
            self.stats.requested_tokens += len(r.tokens) + (r.prefix.num_tokens if r.prefix else 0)
        # a batch's requests share a few readout objects: classify each once, not per row
        kinds: dict[int, tuple[str, Any]] = {}
        for r in requests:
            ro = r.readout
            if id(ro) not in kinds:
                kinds[id(ro)] = (self._kind(ro), ro)
        self._prepare_references([ro for _, ro in kinds.values()])
        answers: list[Answer | None] = [None] * len(requests)
        groups: dict[str, list[int]] = {"gen": [], "span": [], "forced": [], "one": []}
        for i, r in enumerate(requests):
            groups[kinds[id(r.readout)][0]].append(i)
        one_step, forced, gen, spans = groups["one"], groups["forced"], groups["gen"], \
            groups["span"]
        vocabs = {k: self._vocab(ro) for k, (kind, ro) in kinds.items() if kind == "one"}
        jobs = [SeqJob(list(requests[i].tokens), prefixes[i], vocab=vocabs[id(requests[i].readout)])
                for i in one_step]
        fresh = [k for k, i in enumerate(one_step) if prefixes[i] is None]
        paths = self._shared_paths(jobs)
        try:
            if self.prefix_cache is None or not fresh:
                self.runner.run(jobs)
            else:
                self._run_shared(jobs, fresh)
        finally:
            for kv in paths:
                self._free_path(kv)
        for i, answer in zip(one_step, self._one_step_answers(
                [requests[i].readout for i in one_step], [job.logits for job in jobs])):
            answers[i] = answer
        if forced:
            seqs = [(prefixes[i], list(requests[i].tokens)) for i in forced]
            by_labels = [self._labels(requests[i].readout) for i in forced]
            scores = score_labels(self.runner, seqs, by_labels, self._label_kv_tokens())
            for k, i in enumerate(forced):
                ro = requests[i].readout
                answers[i] = label_answers(ro.labels, scores[k], self._reference(ro))
        if spans:
            for i, answer in zip(spans, self._span_answers([requests[i] for i in spans],
                                                           [prefixes[i] for i in spans])):
                answers[i] = answer
        if gen:
            for i, answer in zip(gen, self._generate([requests[i] for i in gen],
                                                     [prefixes[i] for i in gen])):
                answers[i] = answer
        return answers  # type: ignore[return-value]

    def _kind(self, ro: Any) -> str:
        if isinstance(ro, GenerateReadout):
            return "gen"
        if isinstance(ro, SpanReadout):
            return "span"
        if isinstance(ro, LabelReadout) and not self._labels(ro).is_single_step:
            return "forced"
        return "one"

    def _check_length(self, r: Request) -> None:
        if not r.tokens:
            raise ExecutionError("a request needs at least one token of its own")
        prompt = len(r.tokens) + (r.prefix.num_tokens if r.prefix else 0)
        answer = r.readout.max_tokens if isinstance(r.readout, GenerateReadout) else 0
        if prompt > self.max_context:
            raise ExecutionError(
                f"a prompt of {prompt} tokens (prefix and own tokens) exceeds the context of "
                f"{self.model_id!r} ({self.max_context} tokens); shorten the input text")
        if prompt + answer > self.max_context:
            raise ExecutionError(
                f"{answer} requested output tokens after a prompt of {prompt} tokens exceed the "
                f"context of {self.model_id!r} ({self.max_context} tokens) by "
                f"{prompt + answer - self.max_context}; lower max_tokens")
