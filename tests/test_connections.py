"""The connection protocol's writes (``api/connections.py``): a response leaves in one
``write`` of the real transport, bytes keep their order, streamed and large bodies are not
held back, and ``close`` sends what is held first. Driven through uvicorn's own httptools
protocol with a transport that records what it is asked to write; the control is uvicorn's
stock protocol, which writes the status line and headers, then the body, separately.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from reward_service.server.api.connections import COALESCE_MAX_BYTES, guarded_protocol

REQUEST = b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n"


class RecordingTransport(asyncio.Transport):
    """What the protocol writes, one entry per ``write`` of the real transport."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        assert not self.closed, "write after close"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _app(bodies: list[bytes], *, gap: bool = False, headers: Any = None) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": headers or [(b"content-length",
                                            str(sum(map(len, bodies))).encode())]})
        for i, body in enumerate(bodies):
            if gap and i:
                await asyncio.sleep(0)  # a streamed body: the loop runs between chunks
            await send({"type": "http.response.body", "body": body,
                        "more_body": i < len(bodies) - 1})
    return app


async def _serve(protocol_class: type, app: Any, data: bytes) -> RecordingTransport:
    config = Config(app, log_config=None, lifespan="off")
    protocol = protocol_class(config=config, server_state=ServerState(), app_state={},
                              _loop=asyncio.get_running_loop())
    transport = RecordingTransport()
    protocol.connection_made(transport)
    protocol.data_received(data)
    for _ in range(20):  # let the request task run to its end
        await asyncio.sleep(0)
    protocol.connection_lost(None)
    return transport


def _guarded() -> type:
    return guarded_protocol(max_connections=100, header_timeout_s=30.0)


def test_a_response_leaves_in_one_write_where_uvicorn_makes_two() -> None:
    app = _app([b'{"ok":true}'])
    stock = asyncio.run(_serve(HttpToolsProtocol, app, REQUEST))
    ours = asyncio.run(_serve(_guarded(), app, REQUEST))
    assert len(stock.writes) == 2, stock.writes  # the control: status + headers, then body
    assert len(ours.writes) == 1, ours.writes
    assert ours.writes[0] == b"".join(stock.writes)  # the same bytes
    assert ours.writes[0].endswith(b'\r\n\r\n{"ok":true}')


def test_pipelined_requests_are_answered_in_order() -> None:
    app = _app([b"one"])
    ours = asyncio.run(_serve(_guarded(), app, REQUEST * 3))
    data = b"".join(ours.writes)
    assert data.count(b"HTTP/1.1 200 OK") == 3
    assert len(ours.writes) == 3  # one write per response
    assert all(w.endswith(b"\r\n\r\none") for w in ours.writes)


def test_a_streamed_body_is_sent_as_it_comes() -> None:
    """Chunks separated by a turn of the loop are not held for the end of the response."""
    chunked = [(b"transfer-encoding", b"chunked")]
    ours = asyncio.run(_serve(_guarded(), _app([b"a", b"b", b"c"], gap=True,
                                               headers=chunked), REQUEST))
    assert len(ours.writes) == 3, ours.writes  # headers + "a"; "b"; "c" + the last chunk
    assert ours.writes[0].endswith(b"\r\n\r\n1\r\na\r\n")
    assert ours.writes[-1] == b"1\r\nc\r\n0\r\n\r\n"


def test_a_large_body_is_not_held() -> None:
    big = b"x" * COALESCE_MAX_BYTES
    ours = asyncio.run(_serve(_guarded(), _app([big, b"tail"]), REQUEST))
    # headers + the big part reach the threshold and go at once; the tail ends the response
    assert len(ours.writes) == 2, [len(w) for w in ours.writes]
    assert ours.writes[0].endswith(big) and ours.writes[1] == b"tail"


def test_close_sends_what_is_held_first() -> None:
    """``connection: close`` makes uvicorn close the transport right after the body."""
    app = _app([b"bye"], headers=[(b"content-length", b"3"), (b"connection", b"close")])
    ours = asyncio.run(_serve(_guarded(), app, REQUEST))
    assert ours.closed
    assert len(ours.writes) == 1 and ours.writes[0].endswith(b"\r\n\r\nbye")


@pytest.mark.parametrize("bad", [b"GET / HTTP/1.1\r\nhost t\r\n\r\n"])
def test_a_malformed_request_still_gets_its_400(bad: bytes) -> None:
    ours = asyncio.run(_serve(_guarded(), _app([b"never"]), bad))
    assert ours.writes and ours.writes[0].startswith(b"HTTP/1.1 400")
    assert ours.closed
