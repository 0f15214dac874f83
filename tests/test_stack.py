"""The lazily read stack: frames on demand, array-likes kept as they are, voxel sizes checked."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tracker.errors import InputError
from tracker.stack import FrameArray, Stack, as_stack
from tracker.validation import InputWarning


class CountingReader:
    """``read_frame`` that remembers which frames were read."""

    def __init__(self, data: np.ndarray):
        self.data, self.reads = data, []

    def __call__(self, t: int) -> np.ndarray:
        self.reads.append(t)
        return self.data[t]


@pytest.fixture
def frames(rng):
    data = rng.integers(0, 1000, (5, 3, 8, 9), dtype=np.uint16)
    return data, CountingReader(data)


def test_frame_array_reads_only_what_is_indexed(frames):
    data, reader = frames
    lazy = FrameArray(data.shape, data.dtype, reader)
    assert (lazy.shape, lazy.dtype, lazy.ndim, len(lazy), lazy.size) == (data.shape, data.dtype, 4, 5, data.size)
    np.testing.assert_array_equal(lazy[2], data[2])
    np.testing.assert_array_equal(lazy[-1, 1], data[-1, 1])
    np.testing.assert_array_equal(lazy[1:4:2, :, 3], data[1:4:2, :, 3])
    np.testing.assert_array_equal(lazy[[0, 3]], data[[0, 3]])
    assert reader.reads == [2, 4, 1, 3, 0, 3]
    np.testing.assert_array_equal(lazy[..., 2], data[..., 2])
    np.testing.assert_array_equal(np.asarray(lazy, dtype=np.float32), data.astype(np.float32))
    assert lazy[5:].shape == (0, 3, 8, 9)
    with pytest.raises(IndexError):
        lazy[5]


def test_stack_public_api(frames):
    data, reader = frames
    stack = Stack(FrameArray(data.shape, data.dtype, reader), (0.4, 0.15, 0.15), notes=["assumed"])
    assert (stack.shape, stack.n_frames, len(stack), stack.dtype) == (data.shape, 5, 5, np.dtype(np.uint16))
    assert stack.voxel_size == (0.4, 0.15, 0.15) and stack.notes == ("assumed",) and stack.path is None
    np.testing.assert_array_equal(stack.frame(3), data[3])
    assert reader.reads == [3]
    assert [f.shape for f in stack] == [(3, 8, 9)] * 5


def test_as_stack_keeps_array_likes_lazy(frames):
    data, reader = frames
    lazy = FrameArray(data.shape, data.dtype, reader)
    stack = as_stack(lazy, (1, 2, 3))
    assert stack.data is lazy and reader.reads == [] and stack.voxel_size == (1.0, 2.0, 3.0)
    assert as_stack(data, (1, 1, 1)).data is data
    assert as_stack(stack) is stack and as_stack(stack, (2, 2, 2)).data is lazy
    assert as_stack(data.tolist(), (1, 1, 1)).shape == data.shape


def test_an_array_without_voxel_size_warns(frames):
    """Every size is in µm: a bare array's 1 µm voxels are said, not silently assumed."""
    with pytest.warns(InputWarning, match="no voxel size given for an array: assuming 1 µm voxels"):
        stack = as_stack(frames[0])
    assert stack.voxel_size == (1.0, 1.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        as_stack(as_stack(frames[0], (1, 1, 1)))  # a Stack keeps its own


@pytest.mark.parametrize("voxel_size", [(1, 2), (1, 0, 1), (1, -1, 1), (1, float("nan"), 1), "abc"])
def test_bad_voxel_size(frames, voxel_size):
    with pytest.raises(InputError, match="voxel size"):
        as_stack(frames[0], voxel_size)


def test_neither_4d_nor_3d():
    for shape in [(4, 5), (2, 3, 4, 5, 6)]:
        with pytest.raises(InputError, match=r"\(T, Z, Y, X\) array \(or \(T, Y, X\)"):
            as_stack(np.zeros(shape), (1.0, 1.0, 1.0))


@pytest.mark.parametrize(("voxel_size", "hint"), [((500.0, 100.0, 100.0), "in nm, give --voxel-size 0.5,0.1,0.1"),
                                                  ((5e-7, 1e-7, 1e-7), "in m, give --voxel-size 0.5,0.1,0.1"),
                                                  ((0.5, 0.1, 0.1), None), ((50.0, 2.0, 2.0), None)])
def test_a_voxel_size_in_the_wrong_unit_gets_a_note(frames, voxel_size, hint):
    stack = Stack(np.zeros((2, 3, 4, 4)), voxel_size)
    unit_notes = [note for note in stack.notes if "light microscope" in note]
    assert stack.voxel_size == voxel_size  # (used as given)
    if hint is None:
        assert unit_notes == []
    else:
        assert len(unit_notes) == 1 and hint in unit_notes[0]


def test_frames_without_voxels_are_refused():
    # (a corrupted ImageJ header read by the fuzzer: (3, 4, 0, 16) crashed deep in the threshold's noise model)
    with pytest.raises(InputError, match="no voxels"):
        Stack(np.zeros((3, 4, 0, 16)), (0.4, 0.1, 0.1))
