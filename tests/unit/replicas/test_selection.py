"""Which engine a session gets: `--workers N` / `--ray-address ADDR` (and the same SessionConfig
fields the dbt profile sets) start replicas on Ray; without them the engine is the in-process
one and Ray is never imported."""

import argparse

import pytest

from quail_engine.cli.session_args import add_session_args, session_config
from quail_engine.errors import QuailError
from quail_engine.exec import SessionConfig, load_engine


def parse(*argv):
    p = argparse.ArgumentParser()
    add_session_args(p)
    return session_config(p.parse_args(list(argv)))


@pytest.mark.parametrize("argv, workers, address", [
    ((), None, None),
    (("--workers", "4"), 4, None),
    (("--ray-address", "head:6379"), None, "head:6379"),
    (("--workers", "2", "--ray-address", "auto"), 2, "auto"),
])
def test_cli_flags_reach_the_session_config(argv, workers, address):
    config = parse(*argv)
    assert (config.workers, config.ray_address) == (workers, address)
    assert config.is_distributed == bool(workers or address)


@pytest.mark.parametrize("bad", ["0", "-1", "two"])
def test_workers_must_be_a_positive_integer(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        parse("--workers", bad)
    assert exc.value.code == 2 and "positive integer" in capsys.readouterr().err
    with pytest.raises(QuailError, match="positive integer"):
        SessionConfig(workers=0)


class StartedOnRay:
    calls: list = []

    @classmethod
    def start(cls, *args):
        cls.calls.append(args)
        return cls()


@pytest.mark.parametrize("config, expected", [
    (SessionConfig(model="m.gguf", device="cpu", precision="bf16", workers=2),
     ("m.gguf", "cpu", "bf16", 2, None, {})),
    (SessionConfig(model="m.gguf", device="cuda", precision="fp8", workers=8,
                   max_batch_tokens=4096),
     ("m.gguf", "cuda:0", "fp8", 8, None, {"token_budget": 4096})),
    # a cluster's device is resolved there (this host may have no GPU)
    (SessionConfig(model="m.gguf", precision="bf16", ray_address="head:6379"),
     ("m.gguf", "auto", "bf16", None, "head:6379", {})),
])
def test_a_distributed_config_loads_replicas_on_ray(config, expected, monkeypatch):
    monkeypatch.setattr("quail_engine.exec.facade.RayEngine", StartedOnRay)
    monkeypatch.setattr("quail_engine.exec.facade.ensure_converted", lambda spec: None)
    StartedOnRay.calls = []
    assert isinstance(load_engine(config), StartedOnRay)
    assert StartedOnRay.calls == [expected]
