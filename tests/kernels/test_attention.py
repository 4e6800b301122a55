"""varlen_attention, prefix_attention and lse_merge against their references, and the join
identity: prefix part + own causal part, merged, equals causal attention over the whole text."""

import pytest
import torch
from kernel_checks import check_fp8, fp32_tol, rel_err
from paged_blocks import pages_each, shuffled_block_table

from quail_kernels.lse_merge import lse_merge, lse_merge_ref
from quail_kernels.prefix_attention import prefix_attention, prefix_attention_ref
from quail_kernels.varlen_attention import (
    causal_amax,
    causal_amax_ref,
    varlen_attention,
    varlen_attention_fp8,
    varlen_attention_fp8_ref,
    varlen_attention_grouped,
    varlen_attention_ref,
)

SEQ_CASES = [  # (lengths, hq, hkv, head_dim)
    ([5], 2, 1, 32),
    ([1, 17, 40], 4, 2, 32),
    ([33, 2, 9], 6, 2, 16),
    ([70], 3, 3, 32),
]


def _packed(lengths, hq, hkv, head_dim, device, seed):
    g = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    q = torch.randn(total, hq, head_dim, generator=g).to(device)
    k = torch.randn(total, hkv, head_dim, generator=g).to(device)
    v = torch.randn(total, hkv, head_dim, generator=g).to(device)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32,
                      device=device)
    return q, k, v, cu


@pytest.mark.parametrize("lengths,hq,hkv,head_dim", SEQ_CASES)
def test_varlen_attention_matches_reference(device, lengths, hq, hkv, head_dim):
    q, k, v, cu = _packed(lengths, hq, hkv, head_dim, device, sum(lengths))
    scale = head_dim ** -0.5
    out, lse = varlen_attention(q, k, v, cu, max(lengths), scale)
    ref, ref_lse = varlen_attention_ref(q, k, v, cu, max(lengths), scale)
    assert rel_err(out, ref) < fp32_tol()
    assert torch.allclose(lse, ref_lse, atol=fp32_tol())


def test_varlen_attention_reads_strided_views(device):
    q, k, v, cu = _packed([9, 4], 4, 2, 32, device, 3)
    qkv = torch.cat([q, k, v], dim=1)
    out, _ = varlen_attention(qkv[:, :4], qkv[:, 4:6], qkv[:, 6:], cu, 9, 0.2)
    ref, _ = varlen_attention_ref(q, k, v, cu, 9, 0.2)
    assert rel_err(out, ref) < fp32_tol()


def test_varlen_attention_computes_only_the_given_sequences(device):
    """`seqs`: the chosen sequences match the reference in either tile order (the other
    sequences' rows are the library's to write)."""
    lengths = [9, 30, 4, 17]
    q, k, v, cu = _packed(lengths, 4, 2, 32, device, 11)
    ref, ref_lse = varlen_attention_ref(q, k, v, cu, max(lengths), 0.3)
    seqs = torch.tensor([0, 2, 3], dtype=torch.int32, device=device)
    for last_first in (True, False):
        out, lse = varlen_attention(q, k, v, cu, 17, 0.3, seqs=seqs, last_first=last_first)
        rows = torch.cat([torch.arange(0, 9), torch.arange(39, 60)]).to(device)
        assert rel_err(out[rows], ref[rows]) < fp32_tol()
        assert torch.allclose(lse[rows], ref_lse[rows], atol=fp32_tol())


def test_grouped_launches_write_every_sequence_like_one_launch(device):
    """Sequences split into launches by length (each with its own longest's tiles) into shared
    outputs: bf16/fp32 like the reference, fp8 with each sequence's own scale; a sequence in
    no group keeps its rows unwritten (the library's)."""
    lengths = [9, 30, 4, 17, 2]
    q, k, v, cu = _packed(lengths, 4, 2, 32, device, 13)
    v[9:39] *= 30.0
    ref, ref_lse = varlen_attention_ref(q, k, v, cu, 30, 0.3)
    groups = [(torch.tensor(ix, dtype=torch.int32, device=device), max(lengths[i] for i in ix))
              for ix in ([1, 3], [0, 2, 4])]
    out, lse, scales = varlen_attention_grouped(q, k, v, cu, 30, groups, 0.3)
    assert scales is None
    assert rel_err(out, ref) < fp32_tol()
    assert torch.allclose(lse, ref_lse, atol=fp32_tol())
    out8, lse8, scales8 = varlen_attention_grouped(q, k, v, cu, 30, groups, 0.3, fp8=True)
    ref8, _, ref_scale = varlen_attention_fp8_ref(q, k, v, cu, 30, 0.3)
    check_fp8(out8.view(62, -1), scales8, ref8.view(62, -1), ref_scale, tol=4e-2)
    assert torch.allclose(lse8, ref_lse, atol=fp32_tol())
    assert float(scales8[10]) > 10 * float(scales8[0])
    partial, _, _ = varlen_attention_grouped(q, k, v, cu, 30, groups[:1], 0.3)
    rows = torch.cat([torch.arange(9, 39), torch.arange(43, 60)]).to(device)
    assert rel_err(partial[rows], ref[rows]) < fp32_tol()


@pytest.mark.parametrize("lengths,hq,hkv,head_dim", SEQ_CASES)
def test_varlen_attention_fp8_out_matches_reference(device, lengths, hq, hkv, head_dim):
    """fp8 epilogue: one scale per token from the max |v| of its sequence up to it (the bound
    on its output row); the unquantized lse as before; a sequence of large values next to one of small ones
    keeps each its own scale."""
    q, k, v, cu = _packed(lengths, hq, hkv, head_dim, device, sum(lengths) + 1)
    v[: lengths[0]] *= 50.0
    out, lse, scale = varlen_attention_fp8(q, k, v, cu, max(lengths), head_dim ** -0.5)
    ref, ref_lse, ref_scale = varlen_attention_fp8_ref(q, k, v, cu, max(lengths),
                                                       head_dim ** -0.5)
    total = sum(lengths)
    assert scale.shape == (total, 1)
    check_fp8(out.view(total, -1), scale, ref.view(total, -1), ref_scale, tol=4e-2)
    assert torch.allclose(lse, ref_lse, atol=fp32_tol())
    if len(lengths) > 1:
        assert float(scale[0]) > 10 * float(scale[-1])


def test_causal_amax_is_each_rows_running_max_from_its_start(device):
    """Each row's bound is the max |x| over its sequence's rows up to it (and the sequence's
    `start`, a cached prefix's max): a peak raises the rows from it on, never the rows before
    it; an empty sequence is skipped; a sequence longer than one scan block carries its max."""
    g = torch.Generator().manual_seed(11)
    lengths = [5, 0, 7, 1500]
    x = torch.randn(sum(lengths), 3, 16, generator=g).to(device)
    x[7, 2, 5] = -40.0  # third row of the third sequence (rows 5..11)
    x[12 + 1200, 0, 0] = 90.0  # in the long sequence's second scan block
    cu = torch.tensor([0, 5, 5, 12, 1512], dtype=torch.int32, device=device)
    got = causal_amax(x, cu)
    assert torch.equal(got.cpu(), causal_amax_ref(x, cu).cpu())
    assert float(got[6]) < 40.0 and float(got[7]) == 40.0 and float(got[11]) == 40.0
    assert float(got[12 + 1199]) < 90.0 and float(got[-1]) == 90.0
    start = torch.tensor([100.0, 0.0, 1.0, 0.0], device=device)
    with_start = causal_amax(x, cu, start)
    assert torch.equal(with_start.cpu(), causal_amax_ref(x, cu, start).cpu())
    assert bool((with_start[:5] == 100.0).all())
    with pytest.raises(ValueError, match="contiguous"):
        causal_amax(x.transpose(0, 1).contiguous().transpose(0, 1), cu)
    with pytest.raises(ValueError, match="one float32 per sequence"):
        causal_amax(x, cu, start[:2])


def test_fp8_rows_round_alike_wherever_their_sequence_is_split(device):
    """A sequence's first rows computed on their own (stored as a prefix, a document before its
    questions) and the same rows inside the whole sequence in one pass: the same fp8 codes and
    scales, since a row's scale reads no row after it (its whole sequence's max would give the
    stored prefix other KV than the whole prompt)."""
    g = torch.Generator().manual_seed(17)
    total, split = 90, 37
    q, k, v = (torch.randn(total, h, 32, generator=g).to(device, DTYPE) for h in (4, 2, 2))
    v[70] *= 40.0  # a peak after the split: it must not reach the rows before it
    whole, _, whole_scale = varlen_attention_fp8(
        q, k, v, torch.tensor([0, total], dtype=torch.int32, device=device), total, 0.25)
    head, _, head_scale = varlen_attention_fp8(
        q[:split], k[:split], v[:split],
        torch.tensor([0, split], dtype=torch.int32, device=device), split, 0.25)
    assert torch.equal(whole_scale[:split], head_scale)
    assert torch.equal(whole[:split].view(torch.uint8), head.view(torch.uint8))
    assert float(whole_scale[-1]) > 10 * float(whole_scale[0])


def _arena(prefix_lens, hkv, head_dim, page, device, seed):
    g = torch.Generator().manual_seed(seed)
    pages = pages_each(prefix_lens, page)
    num_pages = sum(pages) + 3
    k_cache = torch.randn(num_pages, page, hkv, head_dim, generator=g).to(device)
    v_cache = torch.randn(num_pages, page, hkv, head_dim, generator=g).to(device)
    return k_cache, v_cache, shuffled_block_table(pages, num_pages, g).to(device)


@pytest.mark.parametrize("q_lens,prefix_lens,hq,hkv,page", [
    ([3], [40], 4, 2, 16),
    ([15, 1, 30], [16, 0, 70], 6, 2, 16),
    ([8, 8], [33, 100], 3, 1, 32),
])
def test_prefix_attention_matches_reference(device, q_lens, prefix_lens, hq, hkv, page):
    head_dim = 32
    q, _, _, cu = _packed(q_lens, hq, hkv, head_dim, device, sum(q_lens) + hq)
    k_cache, v_cache, table = _arena(prefix_lens, hkv, head_dim, page, device, 7)
    plen = torch.tensor(prefix_lens, dtype=torch.int32, device=device)
    out, lse = prefix_attention(q, k_cache, v_cache, cu, table, plen, max(q_lens), 0.17)
    ref, ref_lse = prefix_attention_ref(q, k_cache, v_cache, cu, table, plen, max(q_lens), 0.17)
    assert rel_err(out, ref) < fp32_tol()
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
    finite = torch.isfinite(ref_lse)
    assert torch.allclose(lse[finite], ref_lse[finite], atol=fp32_tol())


@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("second", [True, False])
def test_lse_merge_matches_reference(device, fp8, second):
    g = torch.Generator().manual_seed(5)
    o1, o2 = (torch.randn(11, 6, 32, generator=g).to(device) for _ in range(2))
    l1, l2 = (3 * torch.randn(11, 6, generator=g).to(device) for _ in range(2))
    l1[0, 0] = float("-inf")
    args = (o1, l1, o2, l2) if second else (o1, l1)
    out, scale = lse_merge(*args, fp8=fp8)
    ref, ref_scale = lse_merge_ref(*args, fp8=fp8)
    if fp8:
        check_fp8(out, scale, ref, ref_scale)
    else:
        assert rel_err(out, ref) < 1e-5


@pytest.mark.parametrize("window", [1, 5, 17, 64])
def test_varlen_attention_sliding_window_matches_reference(device, window):
    q, k, v, cu = _packed([1, 40, 9, 70], 4, 2, 32, device, window)
    out, lse = varlen_attention(q, k, v, cu, 70, 0.3, window=window)
    ref, ref_lse = varlen_attention_ref(q, k, v, cu, 70, 0.3, window=window)
    assert rel_err(out, ref) < fp32_tol()
    assert torch.allclose(lse, ref_lse, atol=fp32_tol())
    if window < 70:  # the window changes the answer
        full, _ = varlen_attention(q, k, v, cu, 70, 0.3)
        assert rel_err(full, ref) > 1e-2


@pytest.mark.parametrize("window", [3, 30, 100])
def test_prefix_attention_sliding_window_matches_reference(device, window):
    q_lens, prefix_lens, hq, hkv, page, d = [6, 11], [45, 20], 4, 2, 16, 32
    k_cache, v_cache, table = _arena(prefix_lens, hkv, d, page, device, 3)
    q, _, _, cu = _packed(q_lens, hq, hkv, d, device, 4)
    plen = torch.tensor(prefix_lens, dtype=torch.int32, device=device)
    positions = torch.cat([torch.arange(p, p + n) for p, n in zip(prefix_lens, q_lens)]).to(device)
    out, lse = prefix_attention(q, k_cache, v_cache, cu, table, plen, max(q_lens), 0.3,
                                window=window, positions=positions)
    ref, ref_lse = prefix_attention_ref(q, k_cache, v_cache, cu, table, plen, max(q_lens), 0.3,
                                        window=window, positions=positions)
    seen = torch.isfinite(ref_lse)
    assert rel_err(out, ref) < fp32_tol()
    assert torch.equal(torch.isfinite(lse), seen)
    assert torch.allclose(lse[seen], ref_lse[seen], atol=fp32_tol())
    with pytest.raises(ValueError, match="one position per query token"):
        prefix_attention(q, k_cache, v_cache, cu, table, plen, max(q_lens), 0.3, window=window)


@pytest.mark.parametrize("fp8", [False, True])
def test_lse_merge_three_strided_partials_into_output_slices(device, fp8):
    """Three partials (the third with a head-major LSE, as cuDNN returns it), merged into two
    row slices of one buffer, equal the reference merge of the whole."""
    g = torch.Generator().manual_seed(9)
    t, h, d = 13, 4, 32
    o1, o2 = (torch.randn(t, h, d, generator=g).to(device) for _ in range(2))
    o3 = torch.randn(1, h, t, d, generator=g).to(device)[0].transpose(0, 1)  # strided view
    l1, l2 = (3 * torch.randn(t, h, generator=g).to(device) for _ in range(2))
    l3 = (3 * torch.randn(1, h, t, 1, generator=g)).to(device).view(h, t).t()
    l2[:, 1] = float("-inf")  # a partial over no keys
    ref, ref_scale = lse_merge_ref(o1, l1, o2, l2, fp8=fp8, third=(o3, l3))
    dtype = torch.float8_e4m3fn if fp8 else o1.dtype
    rows = torch.zeros(t, h * d, device=device, dtype=torch.float32).to(dtype)
    scale = torch.zeros(t, 1, device=device) if fp8 else None
    for lo, hi in ((0, 6), (6, t)):
        lse_merge(o1[lo:hi], l1[lo:hi], o2[lo:hi], l2[lo:hi], fp8=fp8,
                  third=(o3[lo:hi], l3[lo:hi]),
                  out=(rows[lo:hi], scale[lo:hi] if fp8 else None))
    if fp8:
        check_fp8(rows, scale, ref, ref_scale)
    else:
        assert rel_err(rows, ref) < 1e-5
    two, _ = lse_merge(o1, l1, o2, l2)
    assert rel_err(two, ref if not fp8 else lse_merge_ref(o1, l1, o2, l2, third=(o3, l3))[0]) > 1e-2


def test_lse_merge_rejects_a_mismatched_output_buffer(device):
    o = torch.randn(4, 2, 32, device=device)
    lse = torch.randn(4, 2, device=device)
    with pytest.raises(ValueError, match="do not fit"):
        lse_merge(o, lse, out=(torch.empty(3, 64, device=device), None))
    with pytest.raises(ValueError, match="third partial needs a second"):
        lse_merge(o, lse, third=(o, lse))


@pytest.mark.parametrize("prefix_len,suffix_lens", [(37, [5, 12, 1]), (64, [20])])
def test_prefix_plus_suffix_merge_equals_full_causal_attention(device, prefix_len, suffix_lens):
    """What a join partner sees: anchor KV from the arena + its own tokens, merged exactly."""
    hq, hkv, d, page = 4, 2, 32, 16
    g = torch.Generator().manual_seed(prefix_len)
    anchor_k = torch.randn(prefix_len, hkv, d, generator=g).to(device)
    anchor_v = torch.randn(prefix_len, hkv, d, generator=g).to(device)
    n_pages = -(-prefix_len // page)
    k_cache = torch.zeros(n_pages, page, hkv, d, device=device)
    v_cache = torch.zeros_like(k_cache)
    k_cache.view(-1, hkv, d)[:prefix_len] = anchor_k
    v_cache.view(-1, hkv, d)[:prefix_len] = anchor_v
    q, k, v, cu = _packed(suffix_lens, hq, hkv, d, device, 11)
    table = torch.arange(n_pages, dtype=torch.int32, device=device)[None].contiguous()
    seg_cu = torch.tensor([0, sum(suffix_lens)], dtype=torch.int32, device=device)
    plen = torch.tensor([prefix_len], dtype=torch.int32, device=device)
    o_pre, l_pre = prefix_attention(q, k_cache, v_cache, seg_cu, table, plen,
                                    sum(suffix_lens), 0.2)
    o_own, l_own = varlen_attention(q, k, v, cu, max(suffix_lens), 0.2)
    merged, _ = lse_merge(o_pre, l_pre, o_own, l_own)
    bounds = cu.tolist()
    for i, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        full_k = torch.cat([anchor_k, k[s:e]])
        full_v = torch.cat([anchor_v, v[s:e]])
        full_q = torch.cat([torch.zeros(prefix_len, hq, d, device=device), q[s:e]])
        full_cu = torch.tensor([0, prefix_len + e - s], dtype=torch.int32, device=device)
        ref, _ = varlen_attention_ref(full_q, full_k, full_v, full_cu, 0, 0.2)
        got = merged[s:e].view(e - s, hq, d)
        assert rel_err(got, ref[prefix_len:]) < fp32_tol(), f"suffix {i}"


# fp16, not bf16: Triton's interpreter computes bf16 attention wrongly on the CPU (outputs of
# ~1e9 from unit inputs); fp16 rounds the probabilities for the PV product the same way
DTYPE = torch.float16


def _one_row_two_routes(device, fp8: bool, split: int = 64, total: int = 112):
    """One half-precision sequence's last `total - split` rows computed in one causal pass, and over its
    first `split` keys read from arena pages (a cached prefix) plus its own keys, merged as
    the GPU path merges them (gpu/attention.layer_attention): -> (one pass, two parts)."""
    from quail_kernels.prefix_attention import prefix_amax

    hq, hkv, d, page = 4, 2, 32, 16
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(total, h, d, generator=g).to(device, DTYPE)
               for h in (hq, hkv, hkv))
    cu = torch.tensor([0, total], dtype=torch.int32, device=device)
    if fp8:
        codes, _, scales = varlen_attention_fp8(q, k, v, cu, total, 0.25)
        one = (codes.view(total, -1)[split:], scales[split:])
    else:
        one = (varlen_attention(q, k, v, cu, total, 0.25)[0].view(total, -1)[split:], None)
    pages = split // page
    table = torch.randperm(pages + 3, generator=g)[:pages].to(device, torch.int32)[None]
    k_cache = torch.zeros(pages + 3, page, hkv, d, device=device, dtype=DTYPE)
    v_cache = torch.zeros_like(k_cache)
    k_cache[table[0].long()] = k[:split].view(pages, page, hkv, d)
    v_cache[table[0].long()] = v[:split].view(pages, page, hkv, d)
    rest = total - split
    own_cu = torch.tensor([0, rest], dtype=torch.int32, device=device)
    plen = torch.tensor([split], dtype=torch.int32, device=device)
    o_own, l_own = varlen_attention(q[split:], k[split:], v[split:], own_cu, rest, 0.25,
                                    out_dtype=torch.float32)
    o_pre, l_pre = prefix_attention(q[split:], k_cache, v_cache, own_cu, table, plen, rest,
                                    0.25, out_dtype=torch.float32)
    bound = None
    if fp8:
        bound = causal_amax(v[split:], own_cu, start=prefix_amax(v_cache, table, plen, split))
    two = lse_merge(o_own, l_own, o_pre, l_pre, fp8=fp8, bound=bound, dtype=DTYPE)
    return one, two


@pytest.mark.parametrize("fp8", [False, True])
def test_a_row_over_cached_keys_rounds_like_the_row_in_one_pass(device, fp8):
    """A prompt's answer must not depend on whether its beginning was in the prefix cache.
    Over cached keys a row is two partials merged; in one pass it is one accumulation. They
    agree value for value (up to a rare last-bit rounding) because the partials stay float32,
    the running max is a whole number (a tile's bf16 probabilities then differ between the
    routes by powers of two only), and an fp8 row takes the max |v| up to it as its scale in
    both routes."""
    (one, one_scale), (two, two_scale) = _one_row_two_routes(device, fp8)
    if fp8:
        assert torch.equal(one_scale, two_scale)
    differ = (one.float() != two.float()).float().mean().item()
    # (a rare last-bit difference passes; the routes before 4e0e954 differ far above this)
    assert differ < 0.002, f"{differ:.2%} of the values differ between the two routes"
    step = 2.0 ** (-3 if fp8 else -10)  # one unit in the last place, relative
    worst = ((one.float() - two.float()).abs() / one.float().abs().clamp_min(1e-3)).max()
    assert worst <= step * 1.01


def test_prefix_amax_reads_each_segments_pages_only(device):
    from quail_kernels.prefix_attention import prefix_amax

    g = torch.Generator().manual_seed(5)
    lens, page = [37, 0, 16, 5], 16
    cache = torch.randn(12, page, 2, 32, generator=g).to(device)
    table = shuffled_block_table(pages_each(lens, page), 12, g).to(device)
    plen = torch.tensor(lens, dtype=torch.int32, device=device)
    got = prefix_amax(cache, table, plen, max(lens))
    for seg, n in enumerate(lens):
        rows = cache[table[seg].long()].flatten(0, 1)[:n]
        assert got[seg].item() == (rows.abs().max().item() if n else 0.0)
    with pytest.raises(ValueError, match="contiguous"):
        prefix_amax(cache.transpose(2, 3).contiguous().transpose(2, 3), table, plen, 37)


def test_prefix_attention_raises_vmax_to_the_prefix_keys_it_reads(device):
    """`vmax`: the max |v| over each segment's prefix keys, taken from the tiles the kernel
    loads (a decode step's fp8 bound), equal to prefix_amax's and leaving the attention as it
    was; refused where the kernel does not load every key (a window) or reads e4m3 values."""
    from quail_kernels.prefix_attention import prefix_amax

    g = torch.Generator().manual_seed(8)
    lens, page = [37, 0, 16, 5], 16
    k_cache, v_cache = (torch.randn(12, page, 2, 32, generator=g).to(device) for _ in range(2))
    v_cache[3, 4, 1, 9] = -60.0
    table = shuffled_block_table(pages_each(lens, page), 12, g).to(device)
    plen = torch.tensor(lens, dtype=torch.int32, device=device)
    q = torch.randn(4, 4, 32, generator=g).to(device)
    cu = torch.arange(5, dtype=torch.int32, device=device)
    vmax = torch.zeros(4, device=device)
    out, lse = prefix_attention(q, k_cache, v_cache, cu, table, plen, 1, 0.2, vmax=vmax)
    plain, plain_lse = prefix_attention(q, k_cache, v_cache, cu, table, plen, 1, 0.2)
    assert torch.equal(vmax, prefix_amax(v_cache, table, plen, max(lens)))
    assert torch.equal(out, plain) and torch.equal(lse, plain_lse)
    with pytest.raises(ValueError, match="without a window"):
        prefix_attention(q, k_cache, v_cache, cu, table, plen, 1, 0.2, vmax=vmax, window=4,
                         positions=torch.zeros(4, dtype=torch.long, device=device))


def test_lse_merge_takes_a_given_scale_bound(device):
    g = torch.Generator().manual_seed(6)
    o1, o2 = (torch.randn(5, 4, 32, generator=g).to(device) for _ in range(2))
    l1, l2 = (torch.randn(5, 4, generator=g).to(device) for _ in range(2))
    bound = torch.full((5,), 9.0, device=device)
    got, scale = lse_merge(o1, l1, o2, l2, fp8=True, bound=bound)
    want, want_scale = lse_merge_ref(o1, l1, o2, l2, fp8=True, bound=bound)
    assert torch.equal(scale, want_scale) and torch.allclose(scale, bound[:, None] / 448)
    check_fp8(got, scale, want, want_scale)
    with pytest.raises(ValueError, match="one float32 per token"):
        lse_merge(o1, l1, o2, l2, fp8=False, bound=bound)
