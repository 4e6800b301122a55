"""bench grammar --profile's GPU busy time: the union of the kernels' intervals, the idle gaps
between them, whatever order and overlap the intervals come in."""

from __future__ import annotations

from types import SimpleNamespace

from bench.grammar_decode import gpu_busy


def _event(start_us: float, end_us: float, device: str = "DeviceType.CUDA"):
    return SimpleNamespace(time_range=SimpleNamespace(start=start_us, end=end_us),
                           device_type=device)


def test_overlapping_intervals_count_once_and_gaps_between_them():
    events = [_event(3_000, 5_000), _event(0, 2_000), _event(1_000, 1_500),
              _event(4_000, 9_000), _event(0, 50_000, "DeviceType.CPU")]
    line = gpu_busy(events, wall=0.02)
    # busy: [0, 2] and [3, 9] ms = 8 ms of the 9 ms from first to last; one gap of 1 ms
    assert "busy 0.0080 s of 0.0090 s" in line
    assert "idle gaps 1, 0.0010 s; longest (ms): 1.00" in line


def test_no_gpu_events():
    assert gpu_busy([_event(0, 1, "DeviceType.CPU")], wall=1.0) == "gpu: no kernels recorded"
