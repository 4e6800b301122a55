"""bench trust --bands writes a band that covers every machine it was measured on: a new
measurement on another CPU joins the earlier ones (bench/trust.write_band), and the band is
SAFETY x the largest shift among them, per readout kind."""

import json

import pytest

from bench import trust


@pytest.fixture
def bands_file(tmp_path, monkeypatch):
    import quail_engine.infer.reask as reask

    path = tmp_path / "bands.json"
    path.write_text(json.dumps({"models": {"smollm2-135m": {"gguf_sha256": "x", "bands": {
        "bf16-cpu": {"boolean": 0.2, "label": 0.3, "span": 0.3, "decode": 0.7,
                     "max_shift": {"BooleanReadout": 0.1, "LabelReadout": 0.15},
                     "matched": {"BooleanReadout": 600}, "safety": 2.0,
                     "measured_by": "python -m bench trust --bands",
                     "machine": "AMD EPYC, 2 cores", "date": "2026-12-04"}}}}}))
    monkeypatch.setattr(reask, "BANDS_FILE", path)
    return path


def test_a_band_covers_the_largest_shift_of_every_machine(bands_file, monkeypatch):
    monkeypatch.setattr(trust, "machine", lambda: "Intel Xeon, 2 cores")
    measured = {"max_shift": {"BooleanReadout": 0.08, "LabelReadout": 0.25},
                "matched": {"BooleanReadout": 600, "LabelReadout": 600}}
    band = trust.write_band("smollm2-135m", measured, "python -m bench trust --bands",
                            "bf16-cpu")
    # boolean: the earlier machine's 0.1 (larger); label: this machine's 0.25
    assert band == {"boolean": 0.2, "label": 0.5, "span": 0.5}
    entry = json.loads(bands_file.read_text())["models"]["smollm2-135m"]["bands"]["bf16-cpu"]
    assert [m["machine"] for m in entry["measurements"]] == ["AMD EPYC, 2 cores",
                                                              "Intel Xeon, 2 cores"]
    assert entry["decode"] == 0.7  # the decode band is another suite's: kept
    # measuring again on the same machine replaces that machine's measurement only
    measured = {"max_shift": {"BooleanReadout": 0.3, "LabelReadout": 0.1}, "matched": {}}
    band = trust.write_band("smollm2-135m", measured, "again", "bf16-cpu")
    assert band == {"boolean": 0.6, "label": 0.3, "span": 0.6}
    entry = json.loads(bands_file.read_text())["models"]["smollm2-135m"]["bands"]["bf16-cpu"]
    assert len(entry["measurements"]) == 2


def test_auto_keeps_the_seconds_of_the_machine_where_the_band_was_slowest(bands_file):
    """`auto` on a CPU takes the band only where it was the faster: a later machine where it
    ran relatively faster does not overwrite an earlier one where it ran slower."""
    from quail_engine.infer.reask import band_for

    trust.record_seconds("smollm2-135m", "bf16-cpu", 40.0, 43.0)  # the band slower: kept
    # a later --bands run rewrites the band first, then records its own seconds
    trust.write_band("smollm2-135m", {"max_shift": {"BooleanReadout": 0.1}, "matched": {}},
                     "python -m bench trust --bands", "bf16-cpu")
    trust.record_seconds("smollm2-135m", "bf16-cpu", 28.0, 25.0)  # faster here: not kept
    entry = json.loads(bands_file.read_text())["models"]["smollm2-135m"]["bands"]["bf16-cpu"]
    assert entry["seconds"] == {"reference": 40.0, "banded": 43.0}
    trust.record_seconds("smollm2-135m", "bf16-cpu", 20.0, 30.0)  # slower still: kept
    assert band_for("x", "bf16-cpu").banded_s == 30.0


def test_the_holdout_counts_a_decision_the_other_halfs_band_would_not_reask():
    """Each half's band comes from the other half's shifts; a decision outside it that differs
    from float32's is a miss, one inside it or equal to float32's is not."""
    import zlib

    def half_of(full):
        return zlib.crc32(repr(full).encode()) & 1

    keys = [(i,) for i in range(40)]
    a = next(k for k in keys if half_of(k) == 0)
    b = [k for k in keys if half_of(k) == 1][:2]
    # float32: (kind, margin, value); the fast run moves margins by 0.1 except one prompt
    reference = {k: ("BooleanReadout", 1.0, True) for k in (a, *b)}
    fast = {k: ("BooleanReadout", 0.9, True) for k in (a, *b)}
    got = trust.holdout(reference, [fast])
    assert got == {"misses": 0, "decisions": 3, "used": {"BooleanReadout": 1.0}}
    # on one half a prompt flips with margin 0.5: its shift (1.5) is 15x the other half's 0.1,
    # beyond a 2x band, so the flip went out un-re-asked
    fast[b[0]] = ("BooleanReadout", -0.5, False)
    got = trust.holdout(reference, [fast])
    assert got["misses"] == 1 and got["used"]["BooleanReadout"] == 15.0
    # the same flip with margin 0.15 lies inside its half's band (2 x the other half's 0.1):
    # re-asked, so not a miss
    fast[b[0]] = ("BooleanReadout", -0.15, False)
    got = trust.holdout(reference, [fast])
    assert got["misses"] == 0


def test_rows_over_an_fp8_kv_arena_say_so_in_the_table():
    """A GPU run under QUAIL_KV_DTYPE=fp8 marks its rows (kv_arena); the table shows which rows
    read an fp8 arena, so they are not taken for the bf16 arena's."""
    rows = [trust._row("smollm2-135m", "bf16", False, [True, False], [True, True],
                       [True, True], 0.0, 1.0, "h100", batch=64),
            trust._row("smollm2-135m", "bf16", False, [True, True], [True, True],
                       [True, True], 0.0, 1.0, "h100", batch=64, kv_arena="fp8")]
    text = trust.markdown({"date": "2026-12-06", "command": "python -m bench trust",
                           "machine": "x", "prompts": 2, "rows": rows, "shifts": {}})
    lines = [line for line in text.splitlines() if line.startswith("| smollm2-135m")]
    assert lines[0].startswith("| smollm2-135m | h100 | bf16 | off |")
    assert lines[1].startswith("| smollm2-135m | h100 | bf16 (fp8 KV arena) | off |")
