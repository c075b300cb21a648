"""trainer_client.integrations._common: settings from arguments/environment, client reuse,
framework values → request fields (no server)."""

from __future__ import annotations

import asyncio

import pytest

from trainer_client.integrations import _common, slime, trl, verl
from trainer_client.integrations._common import (
    async_client,
    completion_text,
    ground_truth_text,
    make_settings,
    scorer_options,
    sync_client,
)


def test_settings_from_env_and_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARD_SERVICE_URL", "http://a:8000/, http://b:8000")
    monkeypatch.setenv("REWARD_SERVICE_TOKEN", "tok")
    s = make_settings()
    assert s.urls == ("http://a:8000", "http://b:8000") and s.api_token == "tok"
    assert s.chunk_size == 16384 and s.timeout.read == 600.0
    s = make_settings(["http://c:1"], api_token="x", timeout_s=3.0, chunk_size=10,
                      retry_deadline_s=5.0)
    assert (s.urls, s.api_token, s.item_timeout_s, s.chunk_size, s.retry.deadline_s) == (
        ("http://c:1",), "x", 3.0, 10, 5.0)
    monkeypatch.delenv("REWARD_SERVICE_URL")
    with pytest.raises(ValueError, match="REWARD_SERVICE_URL"):
        make_settings()
    with pytest.raises(ValueError, match="must start with http"):
        make_settings("10.0.0.5:8000")


def test_one_sync_client_per_settings_and_process() -> None:
    s = make_settings("http://127.0.0.1:9")
    try:
        assert sync_client(s) is sync_client(s)
        assert sync_client(s) is not sync_client(make_settings("http://127.0.0.1:10"))
    finally:
        _common.close_clients()


def test_one_async_client_per_event_loop() -> None:
    s = make_settings("http://127.0.0.1:9")

    async def get():  # type: ignore[no-untyped-def]
        a, b = async_client(s), async_client(s)
        assert a is b
        await _common.aclose_clients()
        return a

    assert asyncio.run(get()) is not asyncio.run(get())


def test_completion_text() -> None:
    assert completion_text("x") == "x"
    assert completion_text([{"role": "assistant", "content": "a"}]) == "a"
    assert completion_text({"role": "assistant", "content": "a"}) == "a"
    assert completion_text([{"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"},
                            {"role": "assistant", "content": "b"}]) == "b"
    parts = [{"type": "text", "text": "x"}, {"type": "image"}, {"type": "text", "text": "y"}]
    assert completion_text([{"role": "assistant", "content": parts}]) == "xy"
    assert completion_text([{"role": "assistant", "content": None}]) == ""
    with pytest.raises(ValueError, match="no assistant message"):
        completion_text([{"role": "user", "content": "q"}])
    with pytest.raises(ValueError, match="not int"):
        completion_text(3)


def test_ground_truth_text() -> None:
    class NpScalar:
        def tolist(self) -> int:
            return 7

    assert ground_truth_text("18", "g") == "18"
    assert ground_truth_text(18, "g") == "18"
    assert ground_truth_text(NpScalar(), "g") == "7"
    assert ground_truth_text(["x"], "g") == "x"
    for bad, match in ((None, "g is None"), (True, "boolean"), (["a", "b"], "list of 2"),
                       ({"a": 1}, "dict")):
        with pytest.raises(ValueError, match=match):
            ground_truth_text(bad, "g")


def test_scorer_options() -> None:
    assert scorer_options(None) is None
    assert scorer_options({"index": 1}) is None
    assert scorer_options({"rel_tol": 0.1, "choices": ["A"], "x": 1}) == {"rel_tol": 0.1,
                                                                          "choices": ["A"]}


@pytest.mark.parametrize("mod", [_common, slime, trl, verl])
def test_all_is_complete(mod) -> None:  # type: ignore[no-untyped-def]
    public = {n for n, v in vars(mod).items() if not n.startswith("_")
              and getattr(v, "__module__", None) == mod.__name__}
    assert public <= set(mod.__all__), public - set(mod.__all__)
    assert all(hasattr(mod, n) for n in mod.__all__)
