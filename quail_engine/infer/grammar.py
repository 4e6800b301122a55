"""Constrained decoding: at each decode step, the tokens a sequence's grammar allows next.

The grammars are JSON schemas (api.Grammar), compiled and matched by llguidance (a Rust
library with no Python dependencies: it computes a step's token mask for a whole batch in
parallel threads, from the model's own tokenizer.json). A step's masks are packed 32 tokens to
an int32, copied to the logits' device in one transfer and unpacked there, so the choice among
the allowed tokens stays one argmax over the batch's logits.

The JSON is written with the usual separators (", " and ": ") and no other whitespace: free
whitespace lets a small model pad an answer until it runs out of tokens.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import llguidance
import torch

from quail_engine.errors import ExecutionError
from quail_engine.infer.api import Grammar
from quail_engine.infer.gpu.staging import to_device

# a few threads: llguidance's default pool (80% of the CPUs) crowds the decode loop's own
# thread, which the GPU waits on (bench/results/grammar-h100.md), and on a small CPU the model's
# own compute threads
GRAMMAR_THREADS = 2


def grammar_threads() -> int:
    """Threads computing a step's grammar masks: QUAIL_GRAMMAR_THREADS, else GRAMMAR_THREADS
    and at most half the CPUs (at least one)."""
    raw = os.environ.get("QUAIL_GRAMMAR_THREADS", "")
    try:
        threads = int(raw) if raw else max(1, min(GRAMMAR_THREADS, (os.cpu_count() or 1) // 2))
    except ValueError:
        raise ExecutionError(f"QUAIL_GRAMMAR_THREADS must be a whole number, got {raw!r}") from None
    if threads < 1:
        raise ExecutionError(f"QUAIL_GRAMMAR_THREADS must be at least 1, got {raw!r}")
    return threads


JSON_STYLE = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False}


def tokenizer_json(tokenizer: Any) -> str:
    """The tokenizers-library JSON of a loaded tokenizer (infer/tokenizer.Tokenizer over a
    JsonTokenizer or a transformers fast tokenizer)."""
    inner = getattr(tokenizer, "hf", tokenizer)
    if hasattr(inner, "tokenizer_json"):
        return inner.tokenizer_json()
    backend = getattr(inner, "backend_tokenizer", None)
    if backend is None:
        raise ExecutionError("constrained decoding needs a fast tokenizer (tokenizer.json); "
                             f"this model's is {type(inner).__name__}")
    return backend.to_str()


def compile_grammar(grammar: Grammar) -> str:
    """`grammar` as llguidance's grammar text; a schema it cannot compile is an error that
    quotes the schema."""
    if grammar.kind != "json_schema":
        raise ExecutionError(f"unknown grammar kind {grammar.kind!r}")
    text = llguidance.LLMatcher.grammar_from_json_schema(grammar.source, defaults=JSON_STYLE)
    failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(text)
    if failed:
        raise ExecutionError(f"the response format cannot be decoded under a grammar "
                             f"({messages[0]}): {grammar.source}")
    return text


class GrammarMasks:
    """One model's grammar machinery: its llguidance tokenizer (built on the first constrained
    step, when the logits' width is known; seconds for a large vocabulary, once per engine),
    the compiled grammars, and the batched mask computation."""

    def __init__(self, tokenizer: Any, eos_ids: Sequence[int]):
        self._tokenizer = tokenizer
        self._eos = sorted(eos_ids)
        self._ll = None
        self._width = 0
        self._compiled: dict[Grammar, str] = {}
        self._fresh: dict[tuple[Grammar, int], Any] = {}  # a matcher no token has advanced
        self._forced: dict[tuple[Grammar, int], list[int]] = {}  # see forced_start
        # (the llguidance tokenizer, compiled grammars and fresh matchers are built either by
        # `prepare` on the helper thread or on first use by the decode loop: one at a time)
        self._building = threading.RLock()
        self._executor = None
        self._pool = None
        self._buffers: list[Any] = [None, None]  # see _masks
        self._byte_bits: dict[Any, torch.Tensor] = {}  # per device: byte value -> its 8 bits
        self._device_words: dict[Any, torch.Tensor] = {}  # per GPU: the masks copied there
        self._copy_streams: dict[Any, Any] = {}
        self._copied: dict[Any, Any] = {}  # per GPU: an event after the last read of its masks
        self.mask_s = 0.0  # computing masks (on the helper thread when started ahead)
        self.wait_s = 0.0  # the decode loop waiting for masks

    def _lltokenizer(self, width: int):
        if self._ll is None or width != self._width:
            self._ll = llguidance.LLTokenizer(tokenizer_json(self._tokenizer), n_vocab=width,
                                              eos_token=self._eos)
            self._width = width
            self._executor = llguidance.LLExecutor(num_threads=grammar_threads())
        return self._ll

    def matcher(self, grammar: Grammar, width: int):
        """A fresh matcher of `grammar` for one sequence whose logits have `width` entries: a
        copy of one built once per grammar and width, since building a matcher parses the
        grammar again (about a thousand times a copy's cost, paid per admitted row while the
        GPU waits for the step's choices)."""
        key = (grammar, width)
        with self._building:
            if key not in self._fresh:
                if grammar not in self._compiled:
                    self._compiled[grammar] = compile_grammar(grammar)
                matcher = llguidance.LLMatcher(self._lltokenizer(width), self._compiled[grammar],
                                               log_level=0)
                if matcher.is_error():
                    raise ExecutionError(f"the response format cannot be decoded under a "
                                         f"grammar ({matcher.get_error()}): {grammar.source}")
                self._fresh[key] = matcher
            return self._fresh[key].deep_copy()

    def forced_start(self, grammar: Grammar, width: int) -> list[int]:
        """The tokens every answer under `grammar` begins with, whatever the model (`force`
        from a fresh matcher): a JSON schema's answer begins '{"' 'summary' '":' in SmolLM2's
        tokens. The decode loops put these tokens after the prompt, in its prefill pass, where
        they would each have cost a decode step; the answer's tokens are the same. Computed
        once per grammar and width."""
        key = (grammar, width)
        with self._building:
            if key not in self._forced:
                self._forced[key] = self.force(self.matcher(grammar, width), width)
            return self._forced[key]

    def prepare(self, grammars: Sequence[Grammar], width: int) -> Future:
        """Build what the first answers under `grammars` need before their first pass (the
        llguidance tokenizer of the model's vocabulary, the compiled grammars, their fresh
        matchers and forced starts) on the helper thread, from the moment the plan knows them:
        built on first use, the tokenizer alone is a large vocabulary's seconds that the
        first prompts' prefill waits for (its forced start is part of each prompt). A grammar
        that cannot be built is left for its first use to report, with its SQL."""
        def build():
            for grammar in grammars:
                try:
                    self.forced_start(grammar, width)
                except Exception:  # noqa: BLE001, S110 - raised again where it is used
                    pass
        return self._helper().submit(build)

    def force(self, matcher, width: int, limit: int | None = None) -> list[int]:
        """Advance `matcher` by the tokens its grammar forces next (at most `limit`) and
        return them: while the grammar allows exactly one token and could not end instead
        (where it could, the model's own choice outside the mask ends the answer: `choose`),
        the masked argmax picks that token whatever the logits say."""
        forced: list[int] = []
        words = (width + 31) // 32
        while (limit is None or len(forced) < limit) and not matcher.is_accepting() and \
                not matcher.is_stopped() and not matcher.is_error():
            mask = torch.frombuffer(bytearray(matcher.compute_bitmask()), dtype=torch.uint8)
            bits = mask[:words * 4].view(torch.int32)
            nonzero = bits.nonzero().flatten().tolist()
            if len(nonzero) != 1:
                break
            word = int(bits[nonzero[0]]) & 0xFFFFFFFF
            if word & (word - 1):  # (two tokens in one word)
                break
            token = nonzero[0] * 32 + word.bit_length() - 1
            if token >= width or token in self._eos or not matcher.consume_token(token):
                break
            forced.append(token)
        return forced

    def consume(self, steps: Sequence[tuple[Any, int]]) -> list[bool]:
        """Advance each (matcher, token) in one parallel call; whether each token was
        allowed (a refused one leaves its matcher in error)."""
        return self._executor.consume_token_par(list(steps))

    def start(self, matchers: Sequence[Any]):
        """Begin computing the next step's masks of `matchers` on a helper thread (llguidance
        releases the GIL), so they are ready when the forward pass that runs meanwhile ends;
        `choose(..., pending=...)` takes them."""
        return self._helper().submit(self._masks, list(matchers))

    def start_step(self, steps: Sequence[tuple[Any, int]], candidates: Sequence[int]):
        """Advance each (matcher, token) of `steps`, then compute the masks of those of
        `candidates` (positions in `steps`) whose token was taken and whose grammar can go
        on, all on the helper thread, so that the decode loop's own bookkeeping for the step
        runs beside both rather than before the masks start. -> two futures: `advanced` gives
        (taken, stopped), a flag of each per step (the loop reads these instead of the
        matchers, which the helper holds meanwhile); `masked` gives the packed masks of the
        candidates taken and not stopped, in order, for `choose_on_device(..., pending=)`.
        A second `start` queues behind this work on the same thread (its masks in their own
        buffer)."""
        advanced: Future = Future()

        def work():
            try:
                taken = self.consume(steps)
                stopped = [ok and m.is_stopped() for (m, _), ok in zip(steps, taken)]
            except BaseException as exc:
                advanced.set_exception(exc)
                raise
            advanced.set_result((taken, stopped))
            live = [k for k in candidates if taken[k] and not stopped[k]]
            return self._masks([steps[k][0] for k in live], buffer=0)

        return advanced, self._helper().submit(work)

    def _helper(self):
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="quail-grammar")
        return self._pool

    def _masks(self, matchers: Sequence[Any], buffer: int = 1):
        """The packed masks of `matchers` (n x words int32, 32 tokens a word), in one of two
        buffers reused across steps (page-locked where a GPU reads them): a step's masks for
        the sequences it advanced (`start_step`) and for those it admitted (`start`) are
        computed one after the other and read together."""
        t0 = time.perf_counter()
        n, words = len(matchers), (self._width + 31) // 32
        held = self._buffers[buffer]
        if held is None or held.shape[0] < n or held.shape[1] != words:
            held = self._buffers[buffer] = torch.empty(
                (max(n, 64), words), dtype=torch.int32, pin_memory=torch.cuda.is_available())
        packed = held[:n]
        self._executor.unsafe_compute_mask_ptr([(m, k) for k, m in enumerate(matchers)],
                                               packed.data_ptr(), words * 4, n)
        self.mask_s += time.perf_counter() - t0
        return packed

    def choose(self, logits, matchers: Sequence[Any], pending=None,
               margins: list[float] | None = None) -> list[int]:
        """The argmax of each row of `logits` (n x width) among the tokens its matcher
        allows (`pending`: those masks from `start`, else computed now); a matcher in an
        error state allows nothing and gets an EOS id. Where the grammar is complete and the
        model's own choice lies outside it, the answer ends (EOS): '8' then ' legs' is the
        number 8, not 8 followed by whatever digits score best. `margins`, when given, gets
        each row's decision margin (see `_margins`)."""
        t0 = time.perf_counter()
        packed = pending.result() if pending is not None else self._masks(matchers)
        self.wait_s += time.perf_counter() - t0
        allowed = self._allowed(logits, packed)
        best, leaves, empty = self._masked(logits, allowed)
        best, leaves, empty = torch.stack([best, leaves.long(), empty.long()]).tolist()
        if margins is not None:
            margins += self._margins(logits, allowed, [m.is_accepting() for m in matchers])
        return [self._eos[0] if e or (out and m.is_accepting()) else int(t)
                for t, e, out, m in zip(best, empty, leaves, matchers)]

    def _margins(self, logits, allowed, accepting: Sequence[bool]) -> list[float]:
        """How far each row's choice is from going another way, in logits: the gap between
        its two best allowed tokens and, where the grammar could end here, between the best
        allowed token and the best one outside the grammar (which one is higher decides
        whether the answer ends). A row with one allowed token has no rival inside (inf), and
        one with none is no choice at all (its -inf - -inf is nan: inf too)."""
        inside = torch.where(allowed, logits.float(), float("-inf"))
        top = inside.topk(2, dim=-1).values
        gap = top[:, 0] - top[:, 1]
        outside = torch.where(allowed, float("-inf"), logits.float()).amax(dim=-1)
        cross = (top[:, 0] - outside).abs()
        ends = to_device(list(accepting), logits.device, torch.bool)
        margin = torch.where(ends, torch.minimum(gap, cross), gap)
        return [m if math.isfinite(m) else math.inf for m in margin.tolist()]

    def _allowed(self, logits, packed):
        """[n, width] bool on the logits' device: the tokens each row's packed mask allows.
        Token t is bit t % 8 of byte t // 8 of a row's words (little-endian int32s), so each
        byte is looked up in a 256 x 8 table: one gather that writes the result, where
        shifting the words out to 32 ints each wrote and read 8x the result's bytes twice."""
        n, width = logits.shape
        table = self._byte_bits.get(logits.device)
        if table is None:
            values = torch.arange(256, dtype=torch.int32).unsqueeze(-1)
            table = ((values >> torch.arange(8, dtype=torch.int32)) & 1).bool()
            table = self._byte_bits[logits.device] = table.to(logits.device)
        data = packed.to(logits.device, non_blocking=True).view(torch.uint8).flatten()
        return table.index_select(0, data.int()).reshape(n, -1)[:, :width]

    def choose_on_device(self, logits, matchers: Sequence[Any], pending=None):
        """What `choose` picks, as a tensor on the logits' device, without the host waiting
        for the GPU: the masks (`pending`: a future of packed masks from `start`, or a list of
        them whose rows follow one another in `logits`; else computed now; the matchers have
        taken every token so far) and the choice queued behind the pass that writes `logits`
        (the overlapped decode, infer/decode_overlap.py, computes them while that pass runs)."""
        t0 = time.perf_counter()
        if pending is None:
            parts = [self._masks(matchers)]
        else:
            parts = [p.result() for p in (pending if isinstance(pending, list) else [pending])]
            self.wait_s += time.perf_counter() - t0
        if logits.is_cuda and logits.shape[0] and sum(map(len, parts)) == logits.shape[0]:
            return self._choose_on_gpu(logits, matchers, [p for p in parts if len(p)])
        at, allowed = 0, []
        for packed in parts:
            allowed.append(self._allowed(logits[at:at + len(packed)], packed))
            at += len(packed)
        allowed = allowed[0] if len(allowed) == 1 else torch.cat(allowed)
        accepting = to_device([m.is_accepting() for m in matchers], logits.device, torch.bool)
        best, leaves, empty = self._masked(logits, allowed)
        return torch.where(empty | (leaves & accepting), self._eos[0], best)

    def _choose_on_gpu(self, logits, matchers: Sequence[Any], parts: Sequence[Any]):
        """choose_on_device on a GPU: the packed masks copied on a side stream (beside the
        forward pass still running) and the choice made by one kernel that reads them packed
        and the logits once (quail_kernels/masked_choice.py), where unpacking them to a
        boolean matrix and masking a copy of the logits cost a constrained step more GPU time
        than the rest of its choice."""
        from quail_kernels.masked_choice import masked_choice  # (deferred: triton, GPU only)

        device, n = logits.device, logits.shape[0]
        words = parts[0].shape[1]
        buf = self._device_words.get(device)
        if buf is None or buf.shape[0] < n or buf.shape[1] != words:
            buf = self._device_words[device] = torch.empty((max(n, 64), words),
                                                           dtype=torch.int32, device=device)
            self._copied.pop(device, None)
        stream = self._copy_streams.get(device)
        if stream is None:
            stream = self._copy_streams[device] = torch.cuda.Stream(device)
        read = self._copied.get(device)  # the last choice that read the buffer
        if read is not None:
            stream.wait_event(read)
        with torch.cuda.stream(stream):
            at = 0
            for packed in parts:
                buf[at:at + len(packed)].copy_(packed, non_blocking=True)
                at += len(packed)
        main = torch.cuda.current_stream(device)
        main.wait_stream(stream)
        accepting = to_device([m.is_accepting() for m in matchers], device, torch.bool)
        chosen = masked_choice(logits, buf[:n], accepting, self._eos[0])
        read = self._copied[device] = torch.cuda.Event()
        read.record(main)
        return chosen

    def _masked(self, logits, allowed):
        """On the logits' device: each row's best allowed token, whether the row's own best
        token lies outside its mask, and whether its mask allows nothing."""
        best = torch.where(allowed, logits, float("-inf")).argmax(dim=-1)
        leaves = ~allowed.gather(1, logits.argmax(dim=-1, keepdim=True)).squeeze(1)
        empty = ~allowed.any(dim=-1)
        return best, leaves, empty

