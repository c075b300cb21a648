"""How the supervisor cuts a request into chunks (``reward_service.server.pool.chunk_sizes``) and
deals its items into them (``reward_service.server.pool.records.deal``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reward_service.server.pool import chunk_sizes
from reward_service.server.pool.records import deal


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


@given(n=st.integers(0, 5_000), cap=st.integers(1, 64), workers=st.integers(1, 8))
def test_dealing_puts_every_item_in_exactly_one_chunk_of_its_size(
        n: int, cap: int, workers: int) -> None:
    sizes = chunk_sizes(n, cap, workers)
    chunks = deal(list(range(n)), sizes)
    assert [len(c) for c in chunks] == sizes
    assert sorted(i for c in chunks for i in c) == list(range(n))
    assert all(c == sorted(c) for c in chunks)  # each chunk keeps request order


def test_dealing_spreads_neighbours_over_the_chunks() -> None:
    """A GRPO group (one prompt's 16 samples, costly alike) is not one chunk: its items land
    in 16 different chunks. Control: the contiguous cut puts all 16 in the first chunk."""
    sizes = chunk_sizes(512, 32, 2)
    chunks = deal(list(range(512)), sizes)
    where = {i: c for c, items in enumerate(chunks) for i in items}
    assert len({where[i] for i in range(16)}) == 16
    contiguous = [list(range(sum(sizes[:c]), sum(sizes[: c + 1]))) for c in range(len(sizes))]
    assert set(range(16)) <= set(contiguous[0])
