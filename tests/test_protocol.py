"""The supervisor's frame decoder: any split of the byte stream gives the same messages."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_service import control, protocol
from reward_service.errors import RewardServiceError

_MESSAGES = st.lists(
    st.dictionaries(st.text(max_size=5), st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=50)),
                    max_size=4),
    max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(messages=_MESSAGES, cuts=st.lists(st.integers(min_value=0), max_size=30))
def test_any_split_decodes_every_frame_once(messages: list[dict], cuts: list[int]) -> None:
    data = b"".join(protocol.encode(m) for m in messages)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    decoder = protocol.FrameDecoder()
    out = []
    for a, b in pairwise(points):
        out += decoder.feed(data[a:b])
    assert out == messages
    assert decoder.feed(b"") == []


def test_oversized_and_malformed_frames_are_protocol_errors() -> None:
    with pytest.raises(protocol.ProtocolError):
        protocol.FrameDecoder().feed(protocol._HEADER.pack(protocol.MAX_FRAME + 1))
    with pytest.raises(protocol.ProtocolError):
        protocol.FrameDecoder().feed(protocol._HEADER.pack(3) + b"{x}")


# ---------------------------------------------------------------- the zygote control protocol
_CONTROL = st.one_of(
    st.builds(control.Spawn, id=st.integers(0, 2**31)),
    st.builds(control.Ready, warmup_s=st.floats(0, 1e6), dfa_states=st.integers(0, 2**31)),
    st.builds(control.Spawned, id=st.integers(0, 2**31), pid=st.integers(1, 2**22)),
    st.builds(control.SpawnFailed, id=st.integers(0, 2**31), reason=st.text(max_size=200)),
    st.builds(control.Exited, pid=st.integers(1, 2**22), returncode=st.integers(-64, 255)),
)


@given(msg=_CONTROL)
def test_control_records_round_trip_within_one_packet(msg: control.Message) -> None:
    data = control.encode(msg)
    assert len(data) <= control.MAX_PACKET
    assert control.decode(data) == msg


@pytest.mark.parametrize(
    "packet",
    [
        b"not json",
        b"[1]",
        b'{"op": "nope"}',
        b'{"op": "spawned", "id": 1}',  # a field missing
        b'{"op": "spawned", "id": 1, "pid": "7"}',  # a field of the wrong type
        b'{"op": "spawned", "id": 1, "pid": true}',
        b'{"op": "ready", "extra": 1}',  # a field too many
    ],
)
def test_control_packets_that_are_not_records_are_refused(packet: bytes) -> None:
    with pytest.raises(control.ControlError):
        control.decode(packet)


def test_a_frame_over_the_decoders_limit_is_refused_at_its_header() -> None:
    ok = protocol.encode({"op": "result", "reason": "x" * 900})
    assert protocol.FrameDecoder(max_frame=len(ok)).feed(ok)[0]["reason"] == "x" * 900
    decoder = protocol.FrameDecoder(max_frame=len(ok) - protocol._HEADER.size - 1)
    with pytest.raises(protocol.ProtocolError, match="limit"):
        decoder.feed(ok[: protocol._HEADER.size])  # the header alone: no body is awaited


# ---------------------------------------------------------------- messages from a worker
_RESULT = {"op": "result", "seq": 7, "status": "correct", "extracted": "2",
           "extracted_gold": "2", "reason": None, "elapsed_s": 0.01, "credit": 0.0}


def test_a_valid_result_is_typed_and_long_strings_are_clipped() -> None:
    msg = protocol.parse_worker_message({**_RESULT, "reason": "r" * 50_000})
    assert isinstance(msg, protocol.Result)
    assert (msg.seq, msg.status, msg.extracted, msg.elapsed_s) == (7, "correct", "2", 0.01)
    assert msg.reason is not None and len(msg.reason) == 1000
    ready = protocol.parse_worker_message(
        {"op": "ready", "pid": 5, "sandbox": {"seccomp": {"status": "active", "detail": "x"}}})
    assert ready == protocol.Ready({"seccomp": {"status": "active", "detail": "x"}})
    assert protocol.parse_worker_message({"op": "phase", "seq": 7, "phase": "gold"}) == \
        protocol.Phase(7, gold=True)
    assert protocol.parse_worker_message({"op": "phase", "seq": 7, "phase": "item"}) == \
        protocol.Phase(7, gold=False)


def test_control_error_is_in_the_error_tree() -> None:
    with pytest.raises(RewardServiceError) as info:
        control.decode(b"not json")
    assert isinstance(info.value, control.ControlError | protocol.ProtocolError)


@pytest.mark.parametrize(
    "forged",
    [
        {**_RESULT, "status": "pwned"},
        {**_RESULT, "status": ["correct"]},
        {**_RESULT, "seq": "7"},
        {**_RESULT, "seq": True},
        {**_RESULT, "elapsed_s": -1.0},
        {**_RESULT, "elapsed_s": float("inf")},
        {**_RESULT, "elapsed_s": "0.1"},
        {**_RESULT, "credit": 1.5},  # a worker cannot pay more than a correct answer
        {**_RESULT, "credit": -0.1},
        {**_RESULT, "credit": float("nan")},
        {**_RESULT, "credit": "0.1"},
        {k: v for k, v in _RESULT.items() if k != "credit"},
        {**_RESULT, "extracted": 12},
        {**_RESULT, "reason": {"a": 1}},
        {**_RESULT, "extra": 1},
        {k: v for k, v in _RESULT.items() if k != "elapsed_s"},
        {"op": "fatal", "reason": None},
        {"op": "ready", "pid": 5, "sandbox": {"seccomp": "active"}},
        {"op": "ready", "pid": 5, "sandbox": [1]},
        {"op": "exec", "code": "..."},
        {"op": "phase", "seq": 7, "phase": "response"},
        {"op": "phase", "seq": "7", "phase": "gold"},
        {"op": "phase", "seq": 7},
        [1, 2],
        "result",
    ],
)
def test_forged_worker_messages_are_protocol_errors(forged: object) -> None:
    with pytest.raises(protocol.ProtocolError):
        protocol.parse_worker_message(forged)
