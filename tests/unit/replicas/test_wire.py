"""Requests and answers survive the trip to a worker and back unchanged (quail_engine/replicas/
wire.py): the same tokens, readouts (shared objects stay shared), prefixes (as the worker's ids)
and answers."""

import pickle

import pytest

from quail_engine.infer.api import (
    Answer,
    BooleanReadout,
    GenerateReadout,
    LabelReadout,
    PrefixHandle,
    Request,
)
from quail_engine.replicas.wire import (
    pack_answers,
    pack_requests,
    unpack_answers,
    unpack_requests,
)

YES = BooleanReadout(calibration_tokens=(1, 2, 3))
LABELS = LabelReadout(("positive", "negative"))
REQUESTS = [
    Request((5, 6, 7), YES),
    Request((8,), YES, PrefixHandle(3, 40)),
    Request((9, 10), LABELS, PrefixHandle(3, 40)),
    Request((11, 12), GenerateReadout(max_tokens=4, stop=("\n",)), PrefixHandle(7, 12)),
]


def test_requests_round_trip_onto_the_workers_prefix_handles():
    handles = {3: PrefixHandle(30, 40), 7: PrefixHandle(70, 12)}  # the worker's engine's
    got = unpack_requests(pickle.loads(pickle.dumps(pack_requests(REQUESTS))), handles)
    assert [r.tokens for r in got] == [r.tokens for r in REQUESTS]
    assert [r.readout for r in got] == [r.readout for r in REQUESTS]
    assert [r.prefix for r in got] == [None, handles[3], handles[3], handles[7]]
    assert got[0].readout is got[1].readout  # the engine groups requests by readout object


def test_a_request_over_a_prefix_the_worker_lacks_is_refused():
    with pytest.raises(KeyError, match="prefix 7"):
        unpack_requests(pack_requests(REQUESTS), {3: PrefixHandle(30, 40)})


def test_answers_round_trip():
    answers = [Answer(True, 0.9, 2.2), Answer("negative", 0.6), Answer(0.25, 0.25, -1.1),
               Answer("a summary")]
    assert unpack_answers(pickle.loads(pickle.dumps(pack_answers(answers)))) == answers
