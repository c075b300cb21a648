"""How the supervisor cuts a request into chunks (``reward_service.pool.chunk_sizes``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reward_service.pool import chunk_sizes


@given(n=st.integers(0, 20_000), cap=st.integers(1, 1024), workers=st.integers(1, 64))
def test_sizes_cover_the_request_bounded_and_shrinking(n: int, cap: int, workers: int) -> None:
    sizes = chunk_sizes(n, cap, workers)
    assert sum(sizes) == n
    assert all(1 <= s <= cap for s in sizes)
    assert sizes == sorted(sizes, reverse=True)
    # the tail is spread: the last 2 x workers chunks hold only a few items each
    assert all(s <= max(1, -(-n // (2 * workers))) for s in sizes[-2 * workers:])


def test_a_grpo_batch_ends_in_small_chunks() -> None:
    sizes = chunk_sizes(512, 32, 2)
    assert sizes[:13] == [32] * 13 and sizes[-4:] == [1, 1, 1, 1]
    assert chunk_sizes(3, 32, 2) == [1, 1, 1]  # every worker gets some of a small request
