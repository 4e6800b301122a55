"""Greedy decode with a repetition penalty (GenerateReadout.repetition_penalty): a runner whose
logits always favour the token it just produced loops without one and moves on with one."""

import torch

from quail_engine.infer.decode import DecodeSeq, greedy_decode


class LoopingRunner:
    """Vocabulary of 5: token 1 scores 3.0 after any token, token 2 2.5, token 3 2.1, EOS (4)
    never wins."""

    def run(self, jobs, count_as_decode=False):
        for job in jobs:
            made = 0 if job.prefix is None else job.prefix + 1
            logits = torch.tensor([0.0, 3.0, 2.5, 2.1, -9.0])
            job.logits, job.kv = logits[None], made


def decode(penalty: float) -> list[int]:
    seq = DecodeSeq(tokens=[0], max_tokens=6, repetition_penalty=penalty)
    greedy_decode(LoopingRunner(), [seq], eos_ids={4}, detokenize=lambda ids: " ".join(map(str, ids)))
    return seq.out_tokens


def test_plain_greedy_repeats_the_best_token():
    assert decode(1.0) == [1, 1, 1, 1, 1, 1]


def test_a_penalty_moves_on_to_the_next_best_unused_token():
    # after 1: 3.0/1.5 = 2.0 < 2.5, token 2; after 1, 2: 2.0 and 1.67 < 2.1, token 3
    out = decode(1.5)
    assert out[:3] == [1, 2, 3]
    assert out != decode(1.0)
