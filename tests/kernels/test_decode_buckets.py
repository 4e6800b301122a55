"""QUAIL_DECODE_BUCKETS: the decode graphs' batch sizes, checked as they are read."""

import pytest

from quail_engine.infer.gpu.decode_graph import BUCKETS, bucket_for, buckets_from_env


def test_the_default_buckets_without_the_variable(monkeypatch):
    monkeypatch.delenv("QUAIL_DECODE_BUCKETS", raising=False)
    assert buckets_from_env() == BUCKETS


def test_finer_buckets_pad_fewer_rows(monkeypatch):
    monkeypatch.setenv("QUAIL_DECODE_BUCKETS", "8, 16,320,640")
    sizes = buckets_from_env()
    assert sizes == (8, 16, 320, 640)
    assert (bucket_for(298, sizes), bucket_for(298, BUCKETS)) == (320, 384)


@pytest.mark.parametrize("raw", ["8,x", "16,8", "0,8", "8,8"])
def test_a_malformed_list_is_refused_quoting_it(monkeypatch, raw):
    monkeypatch.setenv("QUAIL_DECODE_BUCKETS", raw)
    with pytest.raises(ValueError, match="QUAIL_DECODE_BUCKETS .*" + raw):
        buckets_from_env()
