"""Label scoring reads a few columns of the full-vocabulary log-softmax for many rows: the LM
head runs a chunk of rows at a time (never rows x vocabulary logits at once), and the columns
equal torch's log-softmax of the whole head."""

import torch

from quail_engine.infer.runner import head_log_probs


class Head:
    """A toy LM head that records the largest number of rows it was given at once."""

    def __init__(self, hidden: int, vocab: int):
        self.weight = torch.randn(vocab, hidden, generator=torch.Generator().manual_seed(0))
        self.most_rows = 0

    def logits(self, h, token_ids=None):
        assert token_ids is None
        self.most_rows = max(self.most_rows, h.shape[0])
        return h @ self.weight.t()


def test_columns_of_the_log_softmax_a_chunk_of_rows_at_a_time():
    head = Head(16, 500)
    hidden = torch.randn(37, 16, generator=torch.Generator().manual_seed(1))
    columns = [3, 499, 0, 250]
    got = head_log_probs(head, hidden, columns, rows_per_chunk=8)
    want = torch.log_softmax(hidden @ head.weight.t(), dim=-1)[:, columns]
    assert got.shape == (37, 4) and got.dtype == torch.float32
    assert torch.allclose(got, want, atol=1e-5)
    assert head.most_rows == 8


def test_no_rows_give_an_empty_table():
    assert head_log_probs(Head(4, 10), torch.zeros(0, 4), [1, 2]).shape == (0, 2)
