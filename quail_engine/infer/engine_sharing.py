"""LocalEngine's prefix sharing by content: rows that start from scratch and prefixes added
without a parent run through the prefix cache (infer/prefix_cache.py), the beginnings two or
more of them share computed first, each row starting after the longest cached chain of pages
its tokens begin with."""

from __future__ import annotations

from typing import Any

from quail_engine.infer.api import EngineStats
from quail_engine.infer.kv_pages import CpuPageStore, cpu_kv_bytes_per_token, pages_for_bytes
from quail_engine.infer.prefix_cache import PrefixCache
from quail_engine.infer.radix import shared_runs
from quail_engine.infer.runner import Runner, SeqJob
from quail_engine.infer.shared_paths import shared_paths

SHARED_KV_BYTES = 1 << 30  # CPU: content-shared prefix pages kept beyond the planner's
# a path prefix's cost beyond its tokens, in tokens (its page copy, a sequence more in a pass),
# and the fewest tokens a call's paths must save to be computed (an extra pass's fixed cost)
PATH_COST = 8
MIN_PATH_SAVING = 2048


class PrefixSharing:
    """LocalEngine's part that shares rows' beginnings through `prefix_cache` (None: no
    sharing); LocalEngine.__init__ sets the attributes below."""

    config: Any
    runner: Runner
    stats: EngineStats
    prefix_cache: PrefixCache | None

    def _prefix_cache(self) -> PrefixCache:
        """Content-shared pages on the CPU: copies of computed KV, up to SHARED_KV_BYTES."""
        store = CpuPageStore()
        per_token = cpu_kv_bytes_per_token(self.config)
        return PrefixCache(store, pages_for_bytes(per_token, store.page_size, SHARED_KV_BYTES))

    def _shared_jobs(self, token_lists: list[list[int]], cache: PrefixCache | None,
                     base: Any = None, **job: Any) -> list[SeqJob]:
        """Jobs for sequences that start from scratch (or after `base`); with the prefix cache,
        the beginnings they share are computed first and each job starts after the longest
        cached beginning of its tokens (whole pages, or a tail shared to the token)."""
        if cache is None:
            return [SeqJob(tokens=t, prefix=base, **job) for t in token_lists]
        cache.warm(self.runner, token_lists, SeqJob)
        hits0 = cache.hit_tokens
        jobs = []
        for tokens in token_lists:
            _, prefix = cache.lookup(tokens)
            start = prefix.num_tokens if prefix is not None else 0
            jobs.append(SeqJob(tokens=tokens[start:], prefix=prefix, **job))
        self.stats.kv_hit_tokens += cache.hit_tokens - hits0
        return jobs

    def _end_batch(self, cache: PrefixCache | None) -> None:
        if cache is not None:
            cache.end_batch()

    def _run_shared(self, jobs: list[SeqJob], fresh: list[int]) -> None:
        """Run `jobs`, those at `fresh` (rows that start from scratch, in the executor's order:
        sorted by prompt) sharing their beginnings through the prefix cache; the beginnings two
        or more of them share are computed first and cached (`warm`). The rows' own KV is
        cached too when it fits `_stored_kv_tokens` (a later batch's rows may begin with any
        of them: a trace's next snapshot, rows of the selectivity sample); when it does not,
        only the last row's, the one the next batch's first rows may begin with. Keeping every
        row's KV of a large batch costs arena pages, evictions and smaller passes on tables
        whose rows share nothing, enough to make sharing slower than none there.

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

    def _path_budget(self) -> int:
        """Path prefixes one call may hold (0: none). The CPU's prefixes are copies of their
        parent's KV (PrefixKV.concat), so a path there would copy its whole anchor: none."""
        return 0

    def _shared_paths(self, jobs: list[SeqJob]) -> list[Any]:
        """Rows over one prefix that begin alike (a join's partners under their anchor) run the
        beginnings they share once: each such beginning is computed as a path prefix over the
        prefix (infer/shared_paths.py), and the rows in `jobs` are rewritten to run only their
        tokens after it. -> the paths' KV, to free (`_free_path`) once the rows ran. A row's
        answer is read at its last token, which it keeps, and its keys are the same tokens'
        (the fp8 scale bound reads no row after a row: attention.row_bound)."""
        budget = self._path_budget() if self.prefix_cache is not None else 0
        if budget <= 0:
            return []
        groups: dict[int, list[int]] = {}
        for k, job in enumerate(jobs):
            if job.prefix is not None:
                groups.setdefault(id(job.prefix), []).append(k)
        planned, paths, saved = [], [], 0
        plans: dict[tuple, Any] = {}  # a join's anchors in one call mostly share their partners
        for ks in groups.values():
            if len(ks) < 2 or len(paths) >= budget:
                continue
            rows = tuple(tuple(jobs[k].tokens) for k in ks)
            plan = plans.get(rows)
            if plan is None or len(plan.paths) > budget - len(paths):
                plan = plans[rows] = shared_paths(rows, PATH_COST, budget - len(paths))
            if plan.paths:
                planned.append((ks, plan, len(paths)))
                paths += [SeqJob(list(jobs[ks[row]].tokens[:depth]), jobs[ks[row]].prefix,
                                 read=(), store_kv=True) for row, depth in plan.paths]
                saved += plan.saved
        if saved < MIN_PATH_SAVING:
            return []
        self.runner.run(paths)
        self.stats.path_prefixes += len(paths)
        for ks, plan, first in planned:
            for row, p in enumerate(plan.start):
                if p >= 0:
                    job = jobs[ks[row]]
                    job.tokens = job.tokens[plan.paths[p][1]:]
                    job.prefix = paths[first + p].kv
        return [p.kv for p in paths]

    def _free_path(self, kv: Any) -> None:
        """Free a path prefix's KV (the CPU's is the job's own memory: nothing to do)."""

    def _stored_kv_tokens(self) -> int | None:
        """Tokens of rows' KV one batch may keep in the prefix cache; None: no bound (the
        CPU's KV is the jobs' own memory, and the cache keeps copies up to its own budget)."""
        return None
