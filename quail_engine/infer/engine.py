"""LocalEngine: the Engine protocol (api.py) on a local model, CPU or GPU.

`run` sorts requests by readout: boolean/score/single-step label requests prefill together (one
read per request, trimmed LM head), colliding labels are scored by teacher forcing, generate
requests decode greedily. Calibration references are computed once per distinct content-free
prompt and cached. Rows that start from scratch and prefixes added without a parent share
their beginnings by content through `prefix_cache` (infer/prefix_cache.py; None when
QUAIL_PREFIX_SHARING=0): one-step readouts only (span, teacher-forced and generate requests
run whole).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import Any

import torch

from quail_engine.errors import ExecutionError
from quail_engine.infer.api import (
    Answer,
    BooleanReadout,
    EngineStats,
    GenerateReadout,
    LabelReadout,
    PrefixHandle,
    Request,
    ScoreReadout,
    SpanReadout,
    sigmoid,
)
from quail_engine.infer.decode import DecodeSeq, fitting, greedy_decode
from quail_engine.infer.decode_overlap import overlappable, overlapped_decode
from quail_engine.infer.kv import KVArena
from quail_engine.infer.kv_pages import CpuPageStore, pages_for_bytes
from quail_engine.infer.labels import label_answers, score_labels
from quail_engine.infer.loader import load_model
from quail_engine.infer.prefix_cache import PrefixCache
from quail_engine.infer.radix import shared_runs
from quail_engine.infer.readout import (
    BooleanTokens,
    boolean_tokens,
    label_tokens,
    span_bounds,
    span_logprob,
)
from quail_engine.infer.runner import Runner, SeqJob
from quail_engine.infer.scheduler import Scheduler
from quail_engine.infer.textio import TextCodec
from quail_engine.settings import prefix_sharing_enabled

log = logging.getLogger(__name__)
SPAN_READS = 256       # span positions per runner call: their full-vocabulary logits are held
SPAN_MAX_TOKENS = 128  # a longer span is scored on its first tokens
SHARED_KV_BYTES = 1 << 30  # CPU: content-shared prefix pages kept beyond the planner's


class LocalEngine:
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

    def _prefix_cache(self) -> PrefixCache:
        """Content-shared pages on the CPU: copies of computed KV, up to SHARED_KV_BYTES."""
        store = CpuPageStore()
        per_token = 0
        if self.config is not None:
            c = self.config
            per_token = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4
        return PrefixCache(store, pages_for_bytes(per_token, store.page_size, SHARED_KV_BYTES))

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

    def _shared_jobs(self, token_lists: list[list[int]], cache: PrefixCache | None,
                     base: Any = None, **job: Any) -> list[SeqJob]:
        """Jobs for sequences that start from scratch (or after `base`); with the prefix cache,
        the beginnings they share are computed first and each job starts after the longest
        cached chain of pages its tokens begin with."""
        if cache is None:
            return [SeqJob(tokens=t, prefix=base, **job) for t in token_lists]
        cache.warm(self.runner, token_lists, SeqJob)
        hits0 = cache.hit_tokens
        jobs = []
        for tokens in token_lists:
            chain, prefix = cache.lookup(tokens)
            start = chain[-1].num_tokens if chain else 0
            jobs.append(SeqJob(tokens=tokens[start:], prefix=prefix, **job))
        self.stats.kv_hit_tokens += cache.hit_tokens - hits0
        return jobs

    def _end_batch(self, cache: PrefixCache | None) -> None:
        if cache is not None:
            cache.end_batch()

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
        never reports more fresh tokens than requested ones."""
        fresh0, requested0 = self.stats.fresh_tokens, self.stats.requested_tokens
        answers = self._run(requests)
        extra = (self.stats.fresh_tokens - fresh0) - (self.stats.requested_tokens - requested0)
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
        if self.prefix_cache is None or not fresh:
            self.runner.run(jobs)
        else:
            self._run_shared(jobs, fresh)
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
            seqs = [DecodeSeq(list(requests[i].tokens), prefixes[i], requests[i].readout.max_tokens,
                              tuple(requests[i].readout.stop),
                              repetition_penalty=requests[i].readout.repetition_penalty,
                              grammar=requests[i].readout.grammar,
                              track_margin=self.track_decode_margins)
                    for i in gen]
            decode = overlapped_decode if overlappable(self.runner, seqs) else greedy_decode
            decode(self.runner, seqs, self.codec.eos_ids, self.codec.decode,
                   self._grammar_masks() if any(s.grammar for s in seqs) else None,
                   self._decode_room(), self._decode_prefill())
            for i, s in zip(gen, seqs):
                answers[i] = Answer(value=s.text if s.complete else None,
                                    margin=s.margin if s.track_margin else None)
        return answers  # type: ignore[return-value]

    def _run_shared(self, jobs: list[SeqJob], fresh: list[int]) -> None:
        """Run `jobs`, those at `fresh` (rows that start from scratch, in the executor's order:
        sorted by prompt) sharing their beginnings through the prefix cache; the beginnings two
        or more of them share are computed first and cached (`warm`). The rows' own KV is
        cached too when it fits `_stored_kv_tokens` (a later batch's rows may begin with any
        of them: a trace's next snapshot, rows of the selectivity sample); when it does not,
        only the last row's, the one the next batch's first rows may begin with. Keeping every
        row's KV of a large batch costs arena pages, evictions and smaller passes on tables
        whose rows share nothing (on the fp8 filter of bench/e2e_gpu.py, keeping every row ran
        slower than no sharing at all).

        A batch whose shared beginnings exceed twice that bound runs as several runs that
        each stay within it (`shared_runs`): a run's shared beginnings and the chains its rows
        read are held in the arena until the run ends, so agent traces with long common
        beginnings, batched by engine time, could otherwise need more pages than a small GPU's
        arena has. Later runs read what earlier ones cached; rows that share nothing stay one
        run."""
        limit = self._stored_kv_tokens()
        runs = [list(range(len(fresh)))] if limit is None else shared_runs(
            [jobs[k].tokens for k in fresh], 2 * limit)
        fresh_set = set(fresh)
        others = [jobs[i] for i in range(len(jobs)) if i not in fresh_set]
        for n, positions in enumerate(runs):  # the other jobs ride with the first run
            self._shared_run(jobs, [fresh[i] for i in positions], others if n == 0 else [],
                             limit)

    def _shared_run(self, jobs: list[SeqJob], run: list[int], others: list[SeqJob],
                    limit: int | None) -> None:
        """One run of `_run_shared`: the rows `jobs[k]` for k in `run` (replaced in `jobs` by
        their jobs over cached chains) and `others` (jobs over the plan's prefixes), in one
        runner call."""
        cache = self.prefix_cache
        try:
            tokens = [jobs[k].tokens for k in run]
            shared = self._shared_jobs(tokens, cache)
            keep = range(len(shared)) if limit is None or sum(map(len, tokens)) <= limit \
                else [len(shared) - 1]
            for j in keep:
                shared[j].store_kv = True
            for k, job in zip(run, shared):
                job.vocab = jobs[k].vocab
                jobs[k] = job
            self.runner.run([*shared, *others])
            for j in keep:
                cache.insert(tokens[j], shared[j].kv)
                cache.store.done(shared[j].kv)
        finally:
            self._end_batch(cache)

    def _decode_prefill(self):
        """The decode loops' prompt prefill with the prefix cache (None without one): the
        beginnings two or more admitted prompts share (a chat template's system text, the
        instruction before each row's document, few-shot examples) are computed once and
        indexed, and each prompt computes only what follows the longest cached chain of pages
        it begins with, in one pass. A sequence's KV then holds those pages by reference (its
        decode steps grow it in place after them, copying nothing)."""
        cache = self.prefix_cache
        if cache is None:
            return None
        bounded = self._decode_room() is not None

        def prefill(seqs: Sequence[DecodeSeq]) -> list[SeqJob]:
            fresh = [list(s.tokens) for s in seqs if s.prefix is None]
            jobs, chains = [], []
            try:
                if len(fresh) > 1:
                    cache.warm(self.runner, fresh, SeqJob)
                hits0 = cache.hit_tokens
                for s in seqs:
                    chain, prefix = cache.lookup(s.tokens) if s.prefix is None \
                        else ([], s.prefix)
                    start = chain[-1].num_tokens if chain else 0
                    jobs.append(SeqJob(tokens=list(s.tokens[start:]), prefix=prefix,
                                       store_kv=True, on_device=True))
                    chains.append(chain)
                self.stats.kv_hit_tokens += cache.hit_tokens - hits0
                self.runner.run(jobs)
            finally:
                cache.end_batch()
            if bounded:
                self._decode_holds += [(weakref.ref(job.kv), tuple(n.page for n in chain))
                                       for job, chain in zip(jobs, chains) if chain]
            return jobs
        return prefill

    def _decode_held_pages(self) -> int:
        """Cached pages that decoding sequences' KV holds: the index counts them, but evicting
        them frees nothing while that KV lives (its sequence running, or its last step still in
        flight)."""
        self._decode_holds = [(kv, pages) for kv, pages in self._decode_holds
                              if (held := kv()) is not None and held.refs > 0]
        return len({p for _, pages in self._decode_holds for p in pages})

    def _grammar_masks(self):
        if self._grammars is None:
            # (llguidance loads only for a constrained answer: plain runs never need it)
            from quail_engine.infer.grammar import GrammarMasks

            self._grammars = GrammarMasks(self.codec.tokenizer, self.codec.eos_ids)
        return self._grammars

    def decode_rows(self, prompt_tokens: int, max_tokens: int) -> int | None:
        """How many answers of `prompt_tokens` + `max_tokens` tokens decode at once in the KV
        arena as it is now; None where the KV is unbounded (the CPU's)."""
        room = self._decode_room()
        if room is None:
            return None
        free, page = room()
        return fitting(free, page, prompt_tokens + max_tokens, self.runner)

    def _decode_room(self):
        """(KV tokens a decode may still allocate, page size) as a callable, for an engine
        whose KV lives in a bounded arena; None: unbounded (the CPU's KV is the jobs' own
        memory)."""
        return None

    def _stored_kv_tokens(self) -> int | None:
        """Tokens of rows' KV one batch may keep in the prefix cache; None: no bound (the
        CPU's KV is the jobs' own memory, and the cache keeps copies up to its own budget)."""
        return None

    def _label_kv_tokens(self) -> int | None:
        """Prompt tokens whose KV label scoring may keep at once; None: no bound (the CPU's KV
        is the jobs' own memory)."""
        return None

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
        total = len(r.tokens) + (r.prefix.num_tokens if r.prefix else 0)
        if isinstance(r.readout, GenerateReadout):
            total += r.readout.max_tokens
        if total > self.max_context:
            raise ExecutionError(
                f"a prompt of {total} tokens (prefix, own tokens and generated tokens) exceeds "
                f"the context of {self.model_id!r} ({self.max_context} tokens); shorten the "
                "input text")

    # -- readouts -----------------------------------------------------------------------------
    def _booleans(self, ro: BooleanReadout | ScoreReadout) -> BooleanTokens:
        key = ("bool", ro.true_words, ro.false_words)
        if key not in self._token_sets:
            self._token_sets[key] = boolean_tokens(self.codec.encode, ro.true_words,
                                                   ro.false_words)
        return self._token_sets[key]

    def _labels(self, ro: LabelReadout):
        key = ("labels", ro.labels)
        if key not in self._token_sets:
            self._token_sets[key] = label_tokens(self.codec.encode, ro.labels)
        return self._token_sets[key]

    def _vocab(self, ro: Any) -> tuple[int, ...]:
        return self._labels(ro).vocab if isinstance(ro, LabelReadout) else self._booleans(ro).vocab

    def _raw_scores(self, ro: Any, logits: torch.Tensor) -> torch.Tensor:
        """[N, len(vocab)] -> boolean margins [N] or label scores [N, num_labels]."""
        if isinstance(ro, LabelReadout):
            return self._labels(ro).first_step_scores(logits)
        return self._booleans(ro).margins(logits)

    def _one_step_answers(self, readouts: Sequence[Any], logits: Sequence[torch.Tensor]
                          ) -> list[Answer]:
        """Answers of one-step readouts; boolean and score readouts that share token sets and
        calibration are scored as one [N, vocab] block (one tensor op per group, not per row)."""
        out: list[Answer | None] = [None] * len(readouts)
        groups: dict[tuple, list[int]] = {}
        keys: dict[int, tuple | None] = {}  # per readout object (a batch shares a few)
        for i, ro in enumerate(readouts):
            key = keys.get(id(ro), False)
            if key is False:
                key = keys[id(ro)] = ((type(ro), self._reference_key(ro) or (
                    "raw", ro.true_words, ro.false_words))
                    if isinstance(ro, (BooleanReadout, ScoreReadout)) else None)
            if key is not None:
                groups.setdefault(key, []).append(i)
            else:
                out[i] = self._one_step_answer(ro, logits[i])
        for (kind, _), rows in groups.items():
            ro = readouts[rows[0]]
            raw = self._booleans(ro).margins(torch.cat([logits[i] for i in rows]))
            ref = self._reference(ro)
            margins = (raw - ref if ref is not None else raw).float().tolist()
            for i, margin in zip(rows, margins):
                p = sigmoid(margin)
                out[i] = (Answer(value=p, score=p, margin=margin) if kind is ScoreReadout
                          else Answer(value=margin > 0, score=p, margin=margin))
        return out  # type: ignore[return-value]

    def _one_step_answer(self, ro: Any, logits: torch.Tensor) -> Answer:
        raw = self._raw_scores(ro, logits)[0]
        if isinstance(ro, LabelReadout):
            return label_answers(ro.labels, raw, self._reference(ro))
        ref = self._reference(ro)
        margin = float(raw - ref) if ref is not None else float(raw)
        p = sigmoid(margin)
        if isinstance(ro, ScoreReadout):
            return Answer(value=p, score=p, margin=margin)
        return Answer(value=margin > 0, score=p, margin=margin)

    def _span_answers(self, requests: Sequence[Request], prefixes: Sequence[Any]) -> list[Answer]:
        """SpanReadout: the span's log-probability after the document minus after the
        calibration prefix (in place of the document and anything before the cue); that
        reference runs once per distinct question text (once per join partner)."""
        trail = len(self.codec.chat_split("", "")[1])
        bounds = []
        for r in requests:
            c, s, e = span_bounds(r.tokens, self.codec.encode(r.readout.cue), trail)
            bounds.append((c, s, min(e, s + SPAN_MAX_TOKENS)))
        keys = [("span", r.readout.calibration_prefix, tuple(r.tokens[c:]), s - c, e - c)
                for r, (c, s, e) in zip(requests, bounds)]
        out: list[Answer] = []
        start = 0
        while start < len(requests):
            stop, reads = start, 0
            while stop < len(requests) and (stop == start or reads < SPAN_READS):
                reads += 2 * (bounds[stop][2] - bounds[stop][1])
                stop += 1
            out += self._span_chunk(requests[start:stop], prefixes[start:stop],
                                    bounds[start:stop], keys[start:stop])
            start = stop
        return out

    def _span_chunk(self, requests, prefixes, bounds, keys) -> list[Answer]:
        jobs = [SeqJob(list(r.tokens), p, read=tuple(range(s - 1, e - 1)))
                for r, p, (_, s, e) in zip(requests, prefixes, bounds)]
        refs: dict[tuple, SeqJob] = {}
        for key in keys:
            _, cal, question, s, e = key
            if cal is not None and key not in self._references and key not in refs:
                head = self.codec.chat_split(cal, "")[0]
                refs[key] = SeqJob(head + list(question),
                                   read=tuple(range(len(head) + s - 1, len(head) + e - 1)))
        self.runner.run(jobs + list(refs.values()))
        for key, job in refs.items():
            self._references[key] = span_logprob(job.logits, key[2][key[3]:key[4]])
        out = []
        for r, job, key, (_, s, e) in zip(requests, jobs, keys, bounds):
            ref = 0.0 if key[1] is None else self._references[key]
            margin = span_logprob(job.logits, r.tokens[s:e]) - ref - r.readout.threshold
            out.append(Answer(value=margin > 0, score=sigmoid(margin), margin=margin))
        return out

    # -- calibration --------------------------------------------------------------------------
    @staticmethod
    def _reference_key(ro: Any) -> tuple | None:
        cal = getattr(ro, "calibration_tokens", None)
        if cal is None:
            return None
        if isinstance(ro, LabelReadout):
            return ("labels", ro.labels, tuple(cal))
        return ("bool", ro.true_words, ro.false_words, tuple(cal))

    def _reference(self, ro: Any) -> torch.Tensor | None:
        key = self._reference_key(ro)
        return None if key is None else self._references[key]

    def _prepare_references(self, readouts: Sequence[Any]) -> None:
        """Run each missing content-free prompt once (raw readout) and cache its scores."""
        todo: dict[tuple, Any] = {}
        for ro in readouts:
            key = self._reference_key(ro)
            if key is not None and key not in self._references:
                todo.setdefault(key, ro)
        one_step = [(k, ro) for k, ro in todo.items()
                    if not (isinstance(ro, LabelReadout) and not self._labels(ro).is_single_step)]
        forced = [(k, ro) for k, ro in todo.items() if (k, ro) not in one_step]
        jobs = [SeqJob(list(ro.calibration_tokens), vocab=self._vocab(ro)) for _, ro in one_step]
        self.runner.run(jobs)
        for (key, ro), job in zip(one_step, jobs):
            self._references[key] = self._raw_scores(ro, job.logits)[0]
        if forced:
            scores = score_labels(self.runner, [(None, list(ro.calibration_tokens))
                                                for _, ro in forced],
                                  [self._labels(ro) for _, ro in forced])
            for (key, _), s in zip(forced, scores):
                self._references[key] = s
        if todo:
            log.debug("computed %d calibration references", len(todo))
