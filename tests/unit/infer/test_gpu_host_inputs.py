"""A GPU pass's host inputs (gpu/runner.host_inputs): token ids, positions after each row's
cached prefix, sequence bounds and read rows, built without a Python list per token."""

from types import SimpleNamespace

import pytest
import torch

from quail_engine.infer.gpu.runner import host_inputs
from quail_engine.infer.runner import SeqJob


def _reference(jobs):
    ids, positions, cu, reads = [], [], [0], []
    for job in jobs:
        n, start = len(job.tokens), job.num_prefix_tokens
        ids += list(job.tokens)
        positions += list(range(start, start + n))
        reads += [cu[-1] + (r if r >= 0 else n + r) for r in job.read]
        cu.append(cu[-1] + n)
    return ids, positions, cu, reads


def test_rows_over_prefixes_and_from_scratch_pack_as_the_lists_did():
    prefix = SimpleNamespace(num_tokens=37)
    jobs = [SeqJob([5, 6, 7]), SeqJob((8, 9), prefix=prefix, read=(0, -1)),
            SeqJob([10], prefix=prefix, read=()), SeqJob(list(range(100, 170)), read=(-1, 3))]
    ids, positions, cu, reads, spans, prefix_tokens, pairs = host_inputs(jobs)
    want = _reference(jobs)
    assert ids.tolist() == want[0] and ids.dtype == torch.long
    assert positions.tolist() == want[1] and positions.dtype == torch.long
    assert cu.tolist() == want[2] and cu.dtype == torch.int32
    assert reads.tolist() == want[3]
    assert spans == [(0, 1), (1, 2), (3, 0), (3, 2)]
    assert prefix_tokens == 74
    assert pairs == sum(len(j.tokens) * j.num_prefix_tokens
                        + len(j.tokens) * (len(j.tokens) + 1) // 2 for j in jobs)


def test_a_read_outside_its_row_is_refused():
    with pytest.raises(ValueError, match="read offset 3 outside a sequence of 3 tokens"):
        host_inputs([SeqJob([1, 2, 3], read=(3,))])
