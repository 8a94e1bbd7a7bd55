"""Replay buffers' arrays stored compactly read back bit for bit: the smallest dtype that
holds an array's values, and next-observation columns as the rows that are not their
source's next row."""

from __future__ import annotations

import numpy as np
import pytest

from popmarl_torch.state import smallest, successor_rows, with_successor_rows


@pytest.mark.parametrize(("array", "dtype"), [
    (np.eye(4, dtype=np.float32), np.uint8),  # one-hot features
    (np.array([0, 3, 200], dtype=np.int64), np.uint8),  # action indices
    (np.array([-1, 5], dtype=np.int64), np.int8),
    (np.array([0.5, -0.0, np.inf], dtype=np.float32), np.float16),
    (np.array([0.1, 2.0], dtype=np.float32), np.float32),  # no smaller dtype holds 0.1f
    (np.array([-0.0, 1.0], dtype=np.float32), np.float16),  # -0.0 is no integer 0
    (np.array([True, False]), np.bool_),
    (np.zeros((0, 3), dtype=np.float64), np.float64),
])
def test_an_array_is_stored_in_the_smallest_dtype_that_casts_back_bit_for_bit(array: np.ndarray, dtype: type) -> None:
    small = smallest(array)
    assert small.dtype == np.dtype(dtype)
    assert small.astype(array.dtype).tobytes() == array.tobytes()


def test_a_next_column_keeps_only_the_rows_that_are_not_the_following_row() -> None:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(50, 3, 4)).astype(np.float32)
    following = np.roll(obs, -1, axis=0).copy()
    ends = [9, 24, 49]  # episode ends: another next observation
    following[ends] = rng.normal(size=(3, 3, 4)).astype(np.float32)
    kept, same = successor_rows(following, obs)
    assert len(kept) == 3 and not same[ends].any() and same.sum() == 47
    assert with_successor_rows(kept, same, obs).tobytes() == following.tobytes()
    with pytest.raises(ValueError):
        with_successor_rows(kept[:2], same, obs)
