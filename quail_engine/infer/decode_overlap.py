"""Greedy decode with the host off the GPU's critical path.

In `decode.greedy_decode` every step ends with the host reading the step's tokens, ending the
sequences that finished, admitting new ones and building the next step's block table, while
the GPU waits. Here the next step is launched from the current step's tokens where they are,
on the device, before the host reads them: the host's work for step N (reading its tokens,
ending sequences, admitting new ones, preparing step N+2) runs while the GPU computes step N+1.

This holds for every sequence but one under a repetition penalty (its next choice needs the
tokens so far on the host) on a runner whose decode steps take and give tokens on the device
(`decode_next`). A grammar's choice waits for its masks, which need the sequence's tokens so
far: as soon as the host reads a step's tokens, the grammars' helper thread feeds them to the
matchers and goes straight on to the next masks, while the step's forward pass runs and this
thread ends sequences, admits new ones and stages the step after (`decode_stage`: the
sequences' KV growth, positions and block table). Once the masks are in, only the masked
choice and one graph launch stand between the pass and the next. While the helper holds a
sequence's matcher this thread does not touch it (llguidance refuses a matcher borrowed by
another thread): it reads what the helper reported instead. The
tokens are the ones `greedy_decode` picks (the same argmax of the same logits, under the same
masks); what changes is when the host learns them: a sequence that ends (EOS, a stop string,
its grammar complete) is known one step late, so it runs one step in vain and that step's
token is dropped. Its KV never exceeds what admission reserved for it (a prompt and
`max_tokens` answer tokens), so the arena still never overflows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from quail_engine.infer.decode import (
    AnswerLengths,
    Carry,
    DecodeSeq,
    _admit,
    _end,
    _make_room,
    _start,
    _take,
    count_preempted,
    prefill_prompts,
)
from quail_engine.infer.gpu.staging import to_device
from quail_engine.infer.runner import SeqJob


def overlappable(runner: Any, seqs: Sequence[DecodeSeq]) -> bool:
    """Whether `seqs` can decode with the host off the critical path on `runner` (not a
    sequence whose step margins a re-ask band reads: the steps' logits stay on the device)."""
    return (getattr(runner, "decode_next", None) is not None
            and getattr(runner, "decode_overlap", False)
            and all(s.repetition_penalty == 1.0 and not s.track_margin for s in seqs))


def overlapped_decode(runner: Any, seqs: Sequence[DecodeSeq], eos_ids: set[int],
                      detokenize: Callable[[list[int]], str], grammars: Any = None,
                      room: Callable[[], tuple[int, int]] | None = None,
                      prefill: Callable[[Sequence[DecodeSeq]], list[SeqJob]] | None = None,
                      lengths: AnswerLengths | None = None,
                      more: Callable[[], list[DecodeSeq]] | None = None,
                      carry: Carry | None = None) -> Carry | None:
    """What `decode.greedy_decode` does for `overlappable` seqs (grammars, stop strings,
    continuous batching, admission by arena room and `lengths`, preemption and `prefill`
    included), each step launched before the previous one's tokens reach the host. A
    preempted sequence's step in flight is dropped with its KV (its token is recomputed by
    its prefill when it is admitted again). `more` and `carry`: as `greedy_decode`'s (a
    carried seq goes on from its KV and its next token, read when this loop returned)."""
    prefill = prefill or (lambda admitted: prefill_prompts(runner, admitted))
    if grammars is None and any(s.grammar is not None for s in seqs):
        raise ValueError("a sequence has a grammar but the engine has no grammar masks")
    waiting, group, states = _start(seqs, carry)
    # each running sequence's KV (grown in place by each step), and the tokens it has been
    # given, read or not; `group`: the sequences whose next token is in flight, in row order
    kv: dict[int, Any] = {id(s): state[0] for s, state in zip(group, states)}
    issued: dict[int, int] = {id(s): len(s.out_tokens) + 1 for s in group}
    tokens = host = ready = None  # those tokens on the device; their host copy and its event
    if group:  # (a carry's next tokens, read already: as if from the admission's prefill)
        host = torch.tensor([state[1] for state in states], dtype=torch.long)
        tokens = to_device(host, runner.device) if hasattr(runner, "device") else host
    del states  # (the KV lives in `kv` alone: an ended sequence's goes back to the arena)
    stage = getattr(runner, "decode_stage", None)
    staged = None  # the next step's inputs, staged at the end of the last iteration
    extras: list[DecodeSeq] = []  # the next call's seqs this loop started (`more`)
    while group or waiting:
        # 1. the next step's forward pass, for the sequences whose in-flight token does not
        #    end them by length (one that ends otherwise is not known yet: it runs in vain)
        rows = _next_rows(group, issued)
        stepped = [group[k] for k in rows]
        following = kept = None
        if rows:
            ids = tokens if len(rows) == len(group) else tokens[to_device(rows, tokens.device)]
            keep = [k for k, s in enumerate(stepped) if s.grammar is not None]
            # (the list is not kept: a sequence's KV must go back to the arena when it ends)
            following, kept = runner.decode_next([kv[id(s)] for s in stepped], ids, keep,
                                                 staged=staged)
            for s in stepped:
                issued[id(s)] += 1
        # 2. read the in-flight tokens (the GPU meanwhile runs the pass just launched); the
        #    grammars take them and go straight on to the next masks on their helper thread,
        #    while this one does the step's bookkeeping
        early = None
        if group:
            if ready is not None:
                ready.synchronize()
            live = [(s, t) for s, t in zip(group, host[:len(group)].tolist()) if not s.finish]
            if grammars is not None:
                taken, stopped, early = _advance_early(grammars, live, stepped, eos_ids)
            else:
                taken, stopped = [True] * len(live), [None] * len(live)
            vain, ran = 0, {id(s) for s in stepped}
            for (s, token), ok, stop in zip(live, taken, stopped):
                if _take(s, token, eos_ids, detokenize, ok, stop) and \
                        len(s.out_tokens) >= s.max_tokens:
                    _end(s, "length", detokenize)
                if s.finish:
                    del kv[id(s)], issued[id(s)]  # its pages go back to the arena
                    vain += id(s) in ran  # (stepped in 1 before its end was known)
            _count_vain(runner, vain)
            if lengths is not None:
                lengths.record([s for s, _ in live if s.finish])
        if extras and all(s.finish for s in seqs):  # this call's answers are done: the
            # next call's running ones go on from their KV and the token in flight, read here
            ahead = following.tolist() if following is not None else []
            return Carry("overlapped",
                         [(s, (kv[id(s)], t)) for s, t in zip(stepped, ahead) if not s.finish],
                         list(waiting), [s for s in extras if s.finish])
        # 3. grow the reservations the next step outgrows (preempting where the arena is
        #    full), then admit waiting sequences into the room the ended ones left
        running = [s for s in stepped if not s.finish]
        if lengths is not None and running:
            def release(v: DecodeSeq) -> None:
                del kv[id(v)], issued[id(v)]  # (its step in flight finishes before reuse)

            preempted = _make_room(running, lambda s: issued[id(s)], room, 2, release)
            if preempted:
                gone = {id(v) for v in preempted}
                rows_kept = [k for k, s in enumerate(stepped) if id(s) not in gone]
                following = following[to_device(rows_kept, following.device)]
                stepped = [stepped[k] for k in rows_kept]
                running = [s for s in running if id(s) not in gone]
                waiting.extendleft(reversed(preempted))
                count_preempted(runner, preempted)
                _count_vain(runner, len(preempted))  # (their steps in flight)
        if more is not None and not waiting:
            extras += (started := more())
            waiting.extend(started)
        admitted = _admit(waiting, running, room, slack=2, lengths=lengths)
        firsts = None
        if admitted:
            jobs = prefill(admitted)
            for s, job in zip(admitted, jobs):
                # (the first token, from the prefill's logits, after any the grammar forced)
                kv[id(s)], issued[id(s)] = job.kv, 1 + len(s.out_tokens)
            first_logits = torch.stack([job.logits[-1] for job in jobs])
            firsts = first_logits.argmax(dim=-1)
            del jobs
        # 4. the admitted sequences' masks queue behind those started in 2 while this thread
        #    stages the next step's inputs (the pass launched in 1 still runs); then the
        #    masked choices are queued behind that pass
        masks = None
        if grammars is not None:
            masks = _start_masks(grammars, stepped, kept, early, admitted,
                                 first_logits if admitted else None)
        group = stepped + admitted
        following_rows = _next_rows(group, issued)
        staged = None
        if stage is not None and following_rows:
            staged = stage([kv[id(group[k])] for k in following_rows])
        if masks is not None:
            following, firsts = _grammar_choices(grammars, masks, following, firsts)
        parts = [t for t in (following, firsts) if t is not None]
        if not parts:
            tokens = host = ready = None
            continue
        tokens = parts[0] if len(parts) == 1 else torch.cat(parts)
        host, ready = _to_host(tokens)
    return Carry("overlapped", done=extras) if extras else None


def _next_rows(group: Sequence[DecodeSeq], issued: dict[int, int]) -> list[int]:
    """The rows of `group` the next step runs: those not ended and not given their
    `max_tokens` tokens yet."""
    return [k for k, s in enumerate(group) if not s.finish and issued[id(s)] < s.max_tokens]


def _advance_early(grammars, live, stepped, eos_ids):
    """Give each live constrained sequence its token read (EOS aside) and start the masks of
    those the pass in flight steps (`stepped`) on the grammars' helper thread; waits only for
    the tokens to be taken. -> (taken, stopped) per live row (for `_take`: True / None where
    no grammar reads the token), and (the sequences masked, the pending masks) or None."""
    taken, stopped = [True] * len(live), [None] * len(live)
    in_step = {id(s) for s in stepped if s.grammar is not None}
    at, steps, candidates = [], [], []
    for k, (s, t) in enumerate(live):
        if s.matcher is not None and t not in eos_ids:
            if id(s) in in_step:
                candidates.append(len(steps))
            at.append(k)
            steps.append((s.matcher, t))
    if not steps:
        return taken, stopped, None
    advanced, pending = grammars.start_step(steps, candidates)
    got, stops = advanced.result()
    for j, k in enumerate(at):
        taken[k], stopped[k] = got[j], stops[j]
    masked = [live[at[j]][0] for j in candidates if got[j] and not stops[j]]
    return taken, stopped, (masked, pending)


def _start_masks(grammars, stepped, kept, early, admitted, first_logits):
    """The masks of each live constrained sequence: the stepped ones `early` started (their
    logits in `kept`), then the admitted ones, whose masks start now (their logits
    `first_logits`) -> (rows, their logits, their matchers, the pending masks), or None when
    there are none. rows: (side, row in `stepped` (0) or `admitted` (1), row in its logits).
    A stepped sequence `early` masked may have ended since (by length): its choice is
    dropped."""
    rows, pending = [], []
    if early is not None and early[0]:
        kept_row = {id(s): k_kept for k_kept, s in enumerate(
            s for s in stepped if s.grammar is not None)}
        row_of = {id(s): k for k, s in enumerate(stepped)}
        rows = [(0, row_of[id(s)], kept_row[id(s)]) for s in early[0]]
        pending.append(early[1])
    fresh = [(1, k, k) for k, s in enumerate(admitted) if s.grammar is not None]
    if not rows and not fresh:
        return None
    rows += fresh
    # (rows list the stepped ones first: one gather from each source, none where all are read)
    parts = []
    for side, source in ((0, kept), (1, first_logits)):
        src = [s for sd, _, s in rows if sd == side]
        if src:
            parts.append(source if src == list(range(len(source)))
                         else source[to_device(src, source.device)])
    logits = parts[0] if len(parts) == 1 else torch.cat(parts)
    for _, k, _ in fresh:
        if admitted[k].matcher is None:
            admitted[k].matcher = grammars.matcher(admitted[k].grammar, logits.shape[-1])
    if fresh:
        pending.append(grammars.start([admitted[k].matcher for _, k, _ in fresh]))
    seqs = [(stepped if side == 0 else admitted)[k] for side, k, _ in rows]
    return rows, logits, [s.matcher for s in seqs], pending


def _grammar_choices(grammars, masks, following, firsts):
    """`following` (the step's tokens) and `firsts` (the admitted sequences' first tokens)
    with each live constrained sequence's token replaced by its grammar's choice under the
    masks `_start_masks` started. A sequence that ended in vain keeps its plain token: it is
    dropped."""
    rows, logits, matchers, pending = masks
    chosen = grammars.choose_on_device(logits, matchers, pending)
    out = [following, firsts]
    for side in (0, 1):
        at = [j for j, (sd, _, _) in enumerate(rows) if sd == side]
        if at:
            out[side] = out[side].clone()
            out[side][to_device([rows[j][1] for j in at], chosen.device)] = \
                chosen[to_device(at, chosen.device)]
    return out[0], out[1]


def _count_vain(runner: Any, tokens: int) -> None:
    """Steps run for sequences already ended count as work (`vain_decode_tokens`), not as
    tokens of answers (`decode_tokens`, which then equals the step-by-step loop's)."""
    stats = getattr(runner, "stats", None)
    if tokens and stats is not None:
        stats.decode_tokens -= tokens
        stats.vain_decode_tokens += tokens


def _to_host(tokens):
    """A copy of `tokens` on the host that arrives without the host waiting, and the CUDA event
    that says it has (None off the GPU, where the copy is done on return)."""
    if tokens.device.type != "cuda":
        return tokens.clone(), None
    host = torch.empty(tokens.shape, dtype=tokens.dtype, pin_memory=True)
    host.copy_(tokens, non_blocking=True)
    ready = torch.cuda.Event()
    ready.record()
    return host, ready
