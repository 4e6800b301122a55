"""Paged-KV block tables the attention tests build over a random arena."""

import torch


def pages_each(prefix_lens, page: int) -> list[int]:
    """The pages each sequence's prefix takes: ceil(len / page), at least one."""
    return [max(1, -(-n // page)) for n in prefix_lens]


def shuffled_block_table(pages: list[int], num_pages: int, generator) -> torch.Tensor:
    """[num_seqs, max(pages)] int32: sequence i's `pages[i]` pages, distinct and in a random
    order out of `num_pages` (pages need not be contiguous); the slots past them are 0."""
    order = torch.randperm(num_pages, generator=generator)
    table = torch.zeros(len(pages), max(pages), dtype=torch.int32)
    used = 0
    for i, n in enumerate(pages):
        table[i, :n] = order[used:used + n]
        used += n
    return table
