"""Position augmentation: randomized positions (Ruoss et al. 2023) and PoSE (Zhu et al. 2024)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pecourse.positions.augmentation import pose_layout, pose_position_ids, randomized_positions
from pecourse.seed import seed_everything


# --- randomized positions ----------------------------------------------------------------
@settings(max_examples=50, deadline=None)
@given(seq_len=st.integers(1, 64), extra=st.integers(0, 500), seed=st.integers(0, 2**31))
def test_randomized_positions_sorted_unique_in_range(seq_len, extra, seed):
    g = torch.Generator().manual_seed(seed)
    pos = randomized_positions(seq_len, seq_len + extra, generator=g)
    assert pos.shape == (seq_len,) and pos.dtype == torch.long
    assert torch.all(pos[1:] > pos[:-1])  # strictly increasing: sorted and distinct
    assert pos.min() >= 0 and pos.max() < seq_len + extra


def test_randomized_positions_when_max_equals_seq_len_is_arange():
    torch.testing.assert_close(randomized_positions(10, 10), torch.arange(10))


def test_randomized_positions_deterministic_with_seeded_generator():
    a = randomized_positions(16, 1000, generator=seed_everything(3))
    b = randomized_positions(16, 1000, generator=seed_everything(3))
    c = randomized_positions(16, 1000, generator=seed_everything(4))
    torch.testing.assert_close(a, b)
    assert not torch.equal(a, c)


def test_randomized_positions_batch_rows_are_independent():
    pos = randomized_positions(8, 1000, generator=seed_everything(0), batch=5)
    assert pos.shape == (5, 8)
    assert torch.all(pos[:, 1:] > pos[:, :-1])
    assert len({tuple(row) for row in pos.tolist()}) == 5


def test_randomized_positions_cover_the_whole_range():
    # Over many draws every position up to max_position turns up: that is the point.
    g = seed_everything(0)
    seen = torch.cat([randomized_positions(8, 64, generator=g) for _ in range(200)])
    assert set(seen.tolist()) == set(range(64))


# --- PoSE ----------------------------------------------------------------------------------
def test_pose_layout_structure():
    ids = pose_layout([3, 2, 4], [0, 5, 20])
    assert ids.tolist() == [0, 1, 2, 8, 9, 25, 26, 27, 28]


def _chunks(ids):
    # Split ids into runs of consecutive integers.
    breaks = (torch.nonzero(ids[1:] - ids[:-1] != 1).flatten() + 1).tolist()
    edges = [0, *breaks, len(ids)]
    return [ids[a:b] for a, b in zip(edges[:-1], edges[1:])]


@settings(max_examples=60, deadline=None)
@given(
    seq_len=st.integers(1, 64),
    extra=st.integers(0, 4000),
    num_chunks=st.integers(1, 6),
    seed=st.integers(0, 2**31),
)
def test_pose_ids_structure(seq_len, extra, num_chunks, seed):
    num_chunks = min(num_chunks, seq_len)
    target = seq_len + extra
    ids = pose_position_ids(seq_len, target, num_chunks=num_chunks, generator=seed_everything(seed))
    assert ids.shape == (seq_len,) and ids.dtype == torch.long
    assert ids[0].item() == 0  # the first chunk starts at 0
    assert ids[-1].item() <= target - 1  # and the ids stay inside the target window
    assert torch.all(ids[1:] > ids[:-1])  # order kept within and between chunks
    # At most num_chunks runs of consecutive ids (two chunks whose skips tie merge into one).
    assert 1 <= len(_chunks(ids)) <= num_chunks


def test_pose_one_chunk_is_plain_arange():
    torch.testing.assert_close(pose_position_ids(12, 1000, num_chunks=1), torch.arange(12))


def test_pose_target_equal_to_seq_len_is_plain_arange():
    ids = pose_position_ids(12, 12, num_chunks=3, generator=seed_everything(0))
    torch.testing.assert_close(ids, torch.arange(12))


def test_pose_deterministic_with_seeded_generator():
    a = pose_position_ids(32, 4096, num_chunks=3, generator=seed_everything(7))
    b = pose_position_ids(32, 4096, num_chunks=3, generator=seed_everything(7))
    torch.testing.assert_close(a, b)


def test_pose_reaches_far_positions():
    # Over many draws the last id spreads across the whole target window.
    g = seed_everything(0)
    last = [pose_position_ids(16, 2048, generator=g)[-1].item() for _ in range(200)]
    assert max(last) > 1800 and min(last) < 300


# --- bad input, one case per test ----------------------------------------------------------
def test_randomized_refuses_max_position_below_seq_len():
    with pytest.raises(ValueError, match="max_position must be >= seq_len"):
        randomized_positions(10, 9)


def test_randomized_refuses_zero_seq_len():
    with pytest.raises(ValueError, match="seq_len"):
        randomized_positions(0, 9)


def test_randomized_refuses_zero_batch():
    with pytest.raises(ValueError, match="batch"):
        randomized_positions(3, 9, batch=0)


def test_randomized_refuses_non_generator():
    with pytest.raises(TypeError, match="generator"):
        randomized_positions(3, 9, generator=0)


def test_pose_refuses_target_below_seq_len():
    with pytest.raises(ValueError, match="target_len must be >= seq_len"):
        pose_position_ids(10, 5)


def test_pose_refuses_zero_chunks():
    with pytest.raises(ValueError, match="num_chunks"):
        pose_position_ids(10, 50, num_chunks=0)


def test_pose_refuses_more_chunks_than_tokens():
    with pytest.raises(ValueError, match="num_chunks must be <= seq_len"):
        pose_position_ids(4, 50, num_chunks=5)


def test_pose_layout_refuses_decreasing_skips():
    with pytest.raises(ValueError, match="skips must be non-decreasing"):
        pose_layout([2, 2, 2], [0, 5, 3])


def test_pose_layout_refuses_nonzero_first_skip():
    with pytest.raises(ValueError, match="skips\\[0\\]"):
        pose_layout([2, 2], [1, 5])


def test_pose_layout_refuses_empty_chunk():
    with pytest.raises(ValueError, match="chunk_lengths\\[1\\]"):
        pose_layout([2, 0], [0, 5])
