"""Greedy decode with a KV cache: prefill each prompt once (keeping its KV), then one token per
sequence per step, all live sequences packed into one forward pass, until EOS, a stop string or
`max_tokens`. A sequence with a grammar picks among the tokens its grammar allows (one mask per
step for all such sequences: infer/grammar.py) and ends when its grammar is complete."""

from __future__ import annotations

import itertools
import math
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from quail_engine.infer.runner import Runner, SeqJob


@dataclass
class DecodeSeq:
    """One prompt to continue: `prefix` KV (or None) + own `tokens`."""

    tokens: Sequence[int]
    prefix: Any = None
    max_tokens: int = 64
    stop: tuple[str, ...] = ()
    repetition_penalty: float = 1.0  # GenerateReadout's: on the tokens generated so far
    grammar: Any = None     # api.Grammar: the text must match it
    out_tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish: str = ""        # "eos", "stop", "length", "grammar" (complete), "error"
    matcher: Any = None
    # with track_margin: the smallest margin of any step's choice (its two best tokens' logit
    # gap; a grammar's, see GrammarMasks.choose): a re-ask band compares it (infer/reask.py)
    track_margin: bool = False
    margin: float = math.inf
    # answer tokens the arena holds room for (admission's reservation: `max_tokens`, or less
    # where AnswerLengths expects a shorter answer; grown as the answer reaches it), the
    # answer tokens already in `tokens` (a grammar's forced start, or a preempted sequence's
    # answer so far, recomputed with its prompt when it is admitted again), and the order in
    # which it was admitted (preemption takes the latest first)
    reserved: int = 0
    prompt_out: int = 0
    admitted_at: int = 0

    @property
    def complete(self) -> bool:
        """Whether the text is a whole answer: a grammar's sequence only once its grammar
        accepted it (else it ran out of tokens or the grammar allowed nothing)."""
        return self.grammar is None or self.finish in ("grammar", "eos")


@dataclass
class Carry:
    """What a decode loop hands the next call when its own answers are done and it had started
    some of the next call's (`more`), so the arena does not drain to this call's longest answers
    while the next call's wait: the seqs running, each with what its loop needs to go on
    (`greedy_decode`: its last pass's job; `overlapped_decode`: its KV and its next token, read
    already), those waiting (preempted ones included), and those done. The next call's loop of
    the same kind (`loop`) takes them up (infer/engine_generation.py); a Carry no call takes up
    is dropped, its KV with it."""

    loop: str
    running: list[tuple[DecodeSeq, Any]] = field(default_factory=list)
    waiting: list[DecodeSeq] = field(default_factory=list)
    done: list[DecodeSeq] = field(default_factory=list)

    def seqs(self) -> list[DecodeSeq]:
        return [s for s, _ in self.running] + self.waiting + self.done


def _start(seqs: Sequence[DecodeSeq], carry: Carry | None) -> tuple[deque, list, list]:
    """A loop's waiting seqs (a carry's waiting, then this call's not begun) and a carry's
    running seqs with their state."""
    carried = {id(s) for s in carry.seqs()} if carry is not None else set()
    for s in seqs:
        if s.max_tokens <= 0 and id(s) not in carried:
            s.finish = "length"
    waiting = deque([*(carry.waiting if carry is not None else ()),
                     *(s for s in seqs if not s.finish and id(s) not in carried)])
    running = list(carry.running) if carry is not None else []
    if carry is not None:  # (taken up: a seq's KV goes back to the arena when the loop ends it)
        carry.running, carry.waiting, carry.done = [], [], []
    return waiting, [s for s, _ in running], [state for _, state in running]


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """`text` up to the earliest stop string, and whether one was found."""
    hits = [text.find(s) for s in stop if s and s in text]
    return (text[:min(hits)], True) if hits else (text, False)


def _next_token(logits, seq: DecodeSeq) -> int:
    """The argmax of `logits` after `seq`'s repetition penalty on the tokens it generated."""
    if seq.repetition_penalty != 1.0 and seq.out_tokens:
        seen = torch.tensor(sorted(set(seq.out_tokens)), device=logits.device)
        logits = logits.float().clone()
        values = logits[seen]
        logits[seen] = torch.where(values > 0, values / seq.repetition_penalty,
                                   values * seq.repetition_penalty)
    if seq.track_margin:
        seq.margin = min(seq.margin, _gaps(logits.unsqueeze(0))[0])
    return int(logits.argmax())


def _gaps(logits) -> list[float]:
    """Each row's logit gap between its two best tokens."""
    top = logits.float().topk(2, dim=-1).values
    return (top[:, 0] - top[:, 1]).tolist()


def greedy_decode(runner: Runner, seqs: Sequence[DecodeSeq], eos_ids: set[int],
                  detokenize: Callable[[list[int]], str], grammars: Any = None,
                  room: Callable[[], tuple[int, int]] | None = None,
                  prefill: Callable[[Sequence[DecodeSeq]], list[SeqJob]] | None = None,
                  forced: bool = False, lengths: AnswerLengths | None = None,
                  more: Callable[[], list[DecodeSeq]] | None = None,
                  carry: Carry | None = None) -> Carry | None:
    """Fill each seq's `out_tokens`, `text` and `finish` (EOS and stop strings not included).
    `grammars` (grammar.GrammarMasks) serves the seqs that have a grammar. Per step the host
    does little per sequence: tokens are picked on the logits' device in one argmax, grammar
    matchers advance in one parallel call, and a text is decoded each step only where a stop
    string needs it (else once, when the sequence ends).

    `room`: (KV tokens the arena can still give, its page size), for a bounded arena (None:
    unbounded). Sequences are admitted while their whole answer fits beside what the running
    ones may still grow to, and the rest wait in order: as running ones finish and release
    their pages, waiting ones are prefilled and join the next steps (continuous batching), so
    any number of sequences completes and the arena never overflows.

    `prefill`: admitted seqs -> their prompts' jobs, run (default `prefill_prompts`; an engine
    with a prefix cache computes the beginnings the prompts share once: engine.py).

    `forced`: the tokens a grammar forces after a step's token ride in the next step with it
    (`_forced_next`), on a runner whose steps take several tokens a sequence (not
    `decode_step`'s one); the answers are the same.

    `lengths` (with `room`): the recent answers' lengths, which admission holds room for
    (AnswerLengths.reserve; default `max_tokens`, so no sequence ever waits for room once
    admitted) and which each answer's length joins as it ends; an answer that outgrows its
    reservation grows it, preempting the latest admitted where the arena is full
    (`_make_room`).

    `more` (plain answers only): the next call's seqs, taken once this call's have all been
    admitted, so they decode as this call's last answers end; the loop returns when this call's
    `seqs` are done, handing what it started of the next call's on (a Carry, which that call
    passes back as `carry`: its running seqs go on from their last pass, this call's seqs
    include them). None: nothing of another call was started."""
    prefill = prefill or (lambda admitted: prefill_prompts(runner, admitted))
    waiting, live, jobs = _start(seqs, carry)
    # a runner whose KV grows in place (GpuRunner.decode_step) holds at most one page beyond
    # a sequence's whole pages; one that stores each token apart and joins it, three
    grow = getattr(runner, "decode_step", None)
    slack = 2 if grow is not None else 3
    extras: list[DecodeSeq] = []  # the next call's seqs this loop started (`more`)
    pending = None  # the constrained seqs' next masks, computed during the forward pass
    while live or waiting:
        if extras and all(s.finish for s in seqs):  # this call's answers are done
            return Carry("greedy", list(zip(live, jobs)), list(waiting),
                         [s for s in extras if s.finish])
        still, step_jobs = [], []
        if live:
            tokens = _choose(live, jobs, grammars, pending)
            pending = None  # (used: a step that starts no masks must not leave these behind)
            consumed = _advance_grammars(live, tokens, eos_ids, grammars)
            for s, job, token, ok in zip(live, jobs, tokens, consumed):
                if not _take(s, token, eos_ids, detokenize, ok):
                    continue
                # (a runner whose steps take one token per sequence grows the KV in place)
                fed = [token] + (_forced_next(s, grammars, job, detokenize)
                                 if forced and grow is None and s.matcher is not None else [])
                if s.finish:
                    continue
                if len(s.out_tokens) >= s.max_tokens:
                    _end(s, "length", detokenize)
                else:
                    still.append(s)
                    step_jobs.append(SeqJob(tokens=fed, prefix=job.kv, store_kv=True,
                                            on_device=True))
            del jobs, job  # the finished seqs' KV goes back to the arena before admitting
            if lengths is not None:
                lengths.record([s for s in live if s.finish])
        if lengths is not None and still:
            at = {id(s): k for k, s in enumerate(still)}

            def release(v: DecodeSeq, jobs=step_jobs, at=at) -> None:
                jobs[at[id(v)]] = None  # (its KV's last holder)

            preempted = _make_room(still, lambda s: len(s.out_tokens), room, slack, release)
            if preempted:
                kept = [k for k, j in enumerate(step_jobs) if j is not None]
                still, step_jobs = [still[k] for k in kept], [step_jobs[k] for k in kept]
                waiting.extendleft(reversed(preempted))
                count_preempted(runner, preempted)
        if more is not None and not waiting:
            extras += (started := more())
            waiting.extend(started)
        admitted = _admit(waiting, still, room, slack, lengths)
        new_jobs = prefill(admitted) if admitted else []
        if step_jobs:
            constrained = [s.matcher for s in still if s.grammar is not None]
            pending = grammars.start(constrained) if constrained and not admitted else None
            if grow is not None:
                grow(step_jobs)
            else:
                runner.run(step_jobs, count_as_decode=True)
        live, jobs = still + admitted, step_jobs + new_jobs
    return Carry("greedy", done=extras) if extras else None


def count_preempted(runner: Runner, seqs: Sequence[DecodeSeq]) -> None:
    """Preempted `seqs` in the runner's stats; the prompts (with answers so far) they will
    recompute count as requested tokens, work beyond the requests' own."""
    stats = getattr(runner, "stats", None)
    if seqs and stats is not None:
        stats.preemptions += len(seqs)
        stats.requested_tokens += sum(len(s.tokens) for s in seqs)


def force_starts(seqs: Sequence[DecodeSeq], grammars: Any, width: int,
                 detokenize: Callable[[list[int]], str]) -> int:
    """Give each constrained seq that has not started the tokens its grammar forces first
    (grammar.GrammarMasks.forced_start): they join its prompt, so its prefill computes them,
    and its answer, its matcher having taken them. The tokens are those the decode steps would
    have picked one by one. A seq they end (its `max_tokens`, a grammar they complete) is
    finished here. A seq with stop strings keeps the steps (its text is cut at each).
    -> the answer tokens forced (EngineStats.forced_tokens: one fewer for a seq they end)."""
    count = 0
    for s in seqs:
        if s.grammar is None or s.out_tokens or s.stop or s.finish or s.max_tokens <= 0:
            continue
        forced = grammars.forced_start(s.grammar, width)[:s.max_tokens]
        if not forced:
            continue
        s.matcher = grammars.matcher(s.grammar, width)
        s.matcher.consume_tokens(forced)
        s.tokens = list(s.tokens) + forced
        s.out_tokens = list(forced)
        s.prompt_out = len(forced)
        count += len(forced)
        if len(s.out_tokens) >= s.max_tokens:
            _end(s, "length", detokenize)
        elif s.matcher.is_stopped():
            _end(s, "grammar" if s.matcher.is_accepting() else "error", detokenize)
        if s.finish:
            count -= 1
    return count


def _forced_next(s: DecodeSeq, grammars: Any, job: SeqJob,
                 detokenize: Callable[[list[int]], str]) -> list[int]:
    """The tokens `s`'s grammar forces after the one it just took (GrammarMasks.force): they
    join its answer and ride in its next step with that token, one pass where each would have
    cost a step (a JSON object's next key and its quotes). Ends `s` where they complete its
    grammar."""
    forced = grammars.force(s.matcher, job.logits.shape[-1], s.max_tokens - len(s.out_tokens))
    s.out_tokens += forced
    if forced and s.matcher.is_stopped():
        _end(s, "grammar" if s.matcher.is_accepting() else "error", detokenize)
    return forced


def prefill_prompts(runner: Runner, seqs: Sequence[DecodeSeq]) -> list[SeqJob]:
    """Run `seqs`' prompts (each after its own prefix), keeping their KV on the device for the
    decode steps; their jobs, whose `logits` give each first token."""
    jobs = [SeqJob(tokens=list(s.tokens), prefix=s.prefix, store_kv=True, on_device=True)
            for s in seqs]
    runner.run(jobs)
    return jobs


_ADMISSIONS = itertools.count(1)  # admission order across loops (preemption's victims)


def _left(s: DecodeSeq) -> int:
    """Answer tokens `s` may still add within its reservation."""
    return max(0, (s.reserved or s.max_tokens) - len(s.out_tokens))


def _admit(waiting: deque, running: Sequence[DecodeSeq],
           room: Callable[[], tuple[int, int]] | None, slack: int = 3,
           lengths: AnswerLengths | None = None) -> list[DecodeSeq]:
    """The waiting seqs (from the front) whose prompt and reserved answer fit the arena beside
    what `running` may still generate within theirs; at least one when nothing runs (a seq
    larger than the whole arena then fails on its own, naming its size). `lengths`: the answer
    tokens to hold room for (AnswerLengths.reserve; default `max_tokens`)."""
    if room is None:
        admitted = list(waiting)
        waiting.clear()
        return admitted
    free, page = room()
    budget = free // page - sum(_pages(_left(s), page, slack) for s in running)
    admitted = []
    while waiting:
        s = waiting[0]
        reserved = s.max_tokens if lengths is None else \
            min(s.max_tokens, max(lengths.reserve(s), len(s.out_tokens) + 1))
        # (answer tokens already in its prompt, a grammar's forced start or a preempted
        # answer so far, count once: they are in both `tokens` and `out_tokens`)
        need = _pages(len(s.tokens) + reserved - len(s.out_tokens), page, slack)
        if (running or admitted) and need > budget:
            break
        budget -= need
        s.reserved, s.admitted_at = reserved, next(_ADMISSIONS)
        admitted.append(waiting.popleft())
    return admitted


def _make_room(running: Sequence[DecodeSeq], fed: Callable[[DecodeSeq], int],
               room: Callable[[], tuple[int, int]] | None, slack: int,
               release: Callable[[DecodeSeq], None]) -> list[DecodeSeq]:
    """Grow the reservation of each running seq whose answer outgrows it at the next step
    (`fed`: the answer tokens its KV holds after that step) to twice its size (at most
    `max_tokens`); where the arena cannot hold every running seq's reservation then, preempt
    the latest admitted ones (never one under a grammar, never the last one running) until it
    can: `release` drops each one's KV, and it is to wait again with its answer so far in its
    prompt (recomputed when it is admitted again, and continued from there). -> the preempted
    seqs, earliest admitted first."""
    if room is None:
        return []
    short = [s for s in running if fed(s) > s.reserved and s.reserved < s.max_tokens]
    if not short:
        return []
    for s in short:
        s.reserved = min(s.max_tokens, max(2 * s.reserved, fed(s)))
    kept = sorted(running, key=lambda s: s.admitted_at)
    victims = [s for s in kept if s.grammar is None]
    preempted: list[DecodeSeq] = []
    free, page = room()
    while victims and len(kept) > 1 and \
            sum(_pages(_left(s), page, slack) for s in kept) > free // page:
        v = victims.pop()
        kept.remove(v)
        release(v)
        v.tokens = list(v.tokens) + v.out_tokens[v.prompt_out:]
        v.prompt_out, v.reserved = len(v.out_tokens), 0
        preempted.append(v)
        free, page = room()
    return preempted[::-1]


class AnswerLengths:
    """The lengths of recent answers, per kind of answer (its max_tokens and stop strings), and
    from them the answer tokens admission reserves for the next one: the recent answers'
    90th percentile and a quarter more, once RECENT_MIN have been seen, else `max_tokens`.
    Answers that run to `max_tokens` (as random weights' do) keep it at `max_tokens`; answers
    that end early let more sequences decode at once, an answer that outgrows its reservation
    growing it (`_make_room`, preempting others where the arena is full). Answers under a
    grammar keep `max_tokens`: their matchers cannot be rewound."""

    RECENT = 512
    RECENT_MIN = 32

    def __init__(self) -> None:
        self._seen: dict[tuple, deque] = {}
        self._lock = threading.Lock()  # (the host sizes batches by it while answers end)

    def reserve(self, s: DecodeSeq) -> int:
        return self.answer_tokens(s.max_tokens, s.stop, s.grammar)

    def answer_tokens(self, max_tokens: int, stop: Sequence[str] = (), grammar: Any = None
                      ) -> int:
        """The answer tokens to reserve for an answer of at most `max_tokens`."""
        with self._lock:
            seen = self._seen.get((max_tokens, tuple(stop)))
            ranked = sorted(seen) if seen is not None else []
        if grammar is not None or len(ranked) < self.RECENT_MIN:
            return max_tokens
        q90 = ranked[(len(ranked) - 1) * 9 // 10]
        return min(max_tokens, max(1, math.ceil(1.25 * q90)))

    def record(self, seqs: Sequence[DecodeSeq]) -> None:
        with self._lock:
            for s in seqs:
                if s.grammar is None and s.finish in ("eos", "stop", "length") and \
                        s.max_tokens > 0:
                    self._seen.setdefault((s.max_tokens, tuple(s.stop)),
                                          deque(maxlen=self.RECENT)).append(len(s.out_tokens))


def fitting(free_tokens: int, page: int, tokens: int, runner: Runner) -> int:
    """How many sequences of `tokens` KV tokens (prompt and answer) `runner`'s decode holds at
    once in `free_tokens` of an arena of `page`-token pages (at least 1)."""
    return max(1, free_tokens // page // sequence_pages(tokens, page, runner))


def sequence_pages(tokens: int, page: int, runner: Runner) -> int:
    """The pages `runner`'s decode loop reserves for a sequence of `tokens` KV tokens (prompt
    and answer) when it admits it (_admit)."""
    return _pages(tokens, page, 2 if getattr(runner, "decode_step", None) is not None else 3)


def _pages(tokens: int, page: int, slack: int = 3) -> int:
    """Pages a sequence's `tokens` more KV tokens may hold at a step's peak: whole pages, and
    `slack` more: a step that stores its token apart and joins it holds three at once (its
    last partial page, the new token's own page, and the page the two are joined into:
    gpu/paged_kv.PagedKVArena.join); one that grows the KV in place, two (the last partial
    page and, where it is shared, its copy)."""
    return tokens // page + slack


def _choose(live: Sequence[DecodeSeq], jobs: Sequence[SeqJob], grammars: Any,
            pending: Any = None) -> list[int]:
    """Each live seq's next token: the seqs with a grammar in one masked argmax over their
    stacked logits (their masks `pending` when started ahead), the others by `_next_token`."""
    tokens = [0] * len(live)
    constrained = [k for k, s in enumerate(live) if s.grammar is not None]
    if constrained:
        if grammars is None:
            raise ValueError("a sequence has a grammar but the engine has no grammar masks")
        width = jobs[constrained[0]].logits.shape[-1]
        for k in constrained:
            if live[k].matcher is None:
                live[k].matcher = grammars.matcher(live[k].grammar, width)
        logits = torch.stack([jobs[k].logits[-1] for k in constrained])
        matchers = [live[k].matcher for k in constrained]
        margins: list[float] | None = \
            [] if any(live[k].track_margin for k in constrained) else None
        for k, token in zip(constrained, grammars.choose(logits, matchers, pending, margins)):
            tokens[k] = token
        for k, m in zip(constrained, margins or ()):
            live[k].margin = min(live[k].margin, m)
    plain = [k for k, s in enumerate(live)
             if s.grammar is None and (s.repetition_penalty == 1.0 or not s.out_tokens)]
    if plain:  # one argmax and one copy to the host for all of them, not one per seq
        logits = torch.stack([jobs[k].logits[-1] for k in plain])
        best = logits.argmax(dim=-1).tolist()
        for k, token in zip(plain, best):
            tokens[k] = int(token)
        tracked = [j for j, k in enumerate(plain) if live[k].track_margin]
        if tracked:
            for j, gap in zip(tracked, _gaps(logits[tracked])):
                live[plain[j]].margin = min(live[plain[j]].margin, gap)
    done = set(plain) | set(constrained)
    for k, s in enumerate(live):
        if k not in done:
            tokens[k] = _next_token(jobs[k].logits[-1], s)
    return tokens


def _advance_grammars(live: Sequence[DecodeSeq], tokens: Sequence[int], eos_ids: set[int],
                      grammars: Any) -> list[bool]:
    """Feed each constrained seq its token (EOS aside) in one call; whether each was taken
    (True for the seqs without a grammar)."""
    steps = [k for k, (s, t) in enumerate(zip(live, tokens))
             if s.matcher is not None and t not in eos_ids]
    taken = [True] * len(live)
    if steps:
        for k, ok in zip(steps, grammars.consume([(live[k].matcher, tokens[k])
                                                  for k in steps])):
            taken[k] = ok
    return taken


def _take(s: DecodeSeq, token: int, eos_ids: set[int],
          detokenize: Callable[[list[int]], str], consumed: bool,
          stopped: bool | None = None) -> bool:
    """Append `token` to `s`; False when `s` has finished (EOS, a stop string, its grammar
    complete or in error). Under a grammar, EOS is allowed only where the grammar accepts.
    `stopped`: whether the grammar can go on after `token`, when the caller read it already
    (the overlapped loop's helper thread holds a live matcher while this runs)."""
    if token in eos_ids:
        _end(s, "eos" if s.matcher is None or s.matcher.is_accepting() else "error", detokenize)
        return False
    if not consumed:
        _end(s, "error", detokenize)
        return False
    s.out_tokens.append(token)
    if s.matcher is not None:
        if s.matcher.is_stopped() if stopped is None else stopped:  # the answer is whole
            _end(s, "grammar" if s.matcher.is_accepting() else "error", detokenize)
            return False
        return True
    if s.stop:
        s.text, stopped = cut_at_stop(detokenize(s.out_tokens), s.stop)
        if stopped:
            s.finish = "stop"
            return False
    return True


def _end(s: DecodeSeq, finish: str, detokenize: Callable[[list[int]], str]) -> None:
    s.finish = finish
    s.text, _ = cut_at_stop(detokenize(s.out_tokens), s.stop if s.grammar is None else ())
