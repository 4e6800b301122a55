"""A session resolves its device and precision once, when it opens: the answers' identity, the
cost model and the engine's load all use that one resolution (exec/config.SessionConfig)."""

import duckdb
import pytest

from quail_engine.errors import SqlError
from quail_engine.exec import config as config_module
from quail_engine.exec import facade
from quail_engine.exec.config import SessionConfig
from quail_engine.settings import Device


@pytest.fixture
def resolutions(monkeypatch):
    calls = []

    def resolve(model, device, precision):
        calls.append((model, device, precision))
        return "fp32" if precision == "auto" else precision

    monkeypatch.setattr(config_module, "resolve_precision", resolve)
    return calls


def test_open_session_and_the_engine_load_share_one_precision(monkeypatch, resolutions):
    loads = []
    monkeypatch.setattr(facade, "load", lambda model, **kw: loads.append(kw) or object())
    config = SessionConfig(model="m", device="cpu", use_cache=False)
    session = facade.open_session(duckdb.connect(), config, text=(None, None), decoder=None)
    facade.load_engine(config)
    assert session.precision == "fp32" and session.device == Device("cpu")
    assert resolutions == [("m", Device("cpu"), "auto")]
    assert loads[0]["resolved"] == "fp32" and loads[0]["precision"] == "auto"


@pytest.mark.parametrize("written,name", [("cpu", "cpu"), ("cuda", "cuda:0"), ("cuda:1", "cuda:1")])
def test_the_session_device_is_the_config_device(written, name):
    config = SessionConfig(device=written, use_cache=False)
    assert config.engine_device == Device(name)
    assert config.engine_device is config.engine_device  # resolved once


@pytest.mark.parametrize("queries_only,refused", [(True, True), (False, False)])
def test_queries_only_is_read_from_the_config(queries_only, refused):
    config = SessionConfig(device="cpu", use_cache=False, queries_only=queries_only)
    con = duckdb.connect()
    session = facade.open_session(con, config, text=(None, None), decoder=None,
                                  engine_factory=object)
    if refused:
        with pytest.raises(SqlError, match="not CREATE statements"):
            session.execute("CREATE TABLE t AS SELECT 1 AS x")
    else:
        session.execute("CREATE TABLE t AS SELECT 1 AS x")
        assert con.execute("SELECT x FROM t").fetchall() == [(1,)]
