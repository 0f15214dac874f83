"""Frames detected side by side on the CPU (tracker.parallel_frames): the same table, order, progress and errors
as one frame at a time; memory-bounded; the Dask per-frame task stays serial."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tracker import pipeline
from tracker.errors import InputError
from tracker.parallel_frames import frames_in_flight, map_frames_in_order, map_in_order, read_ahead
from tracker.pipeline import detect_stack, track_stack
from tracker.simulate import render_stack, simulate_tracks
from tracker.stack import as_stack
from tracker.validation import DETECTION_BYTES_PER_VOXEL

VOXEL = (0.4, 0.15, 0.15)
SHAPE = (7, 10, 48, 48)


@pytest.fixture(scope="module")
def frames():
    field_of_view = tuple((n - 1) * v for n, v in zip(SHAPE[1:], VOXEL))
    truth = simulate_tracks(15, SHAPE[0], field_of_view, 0.3, 0.5, seed=3)
    return render_stack(truth, SHAPE, VOXEL, (0.45, 0.18, 0.18), snr=6, seed=4)


@pytest.fixture(scope="module")
def serial(frames):
    return detect_stack(as_stack(frames, VOXEL), 0.5, device="cpu", workers=1)


def assert_identical(table, expected):
    assert list(table) == list(expected)
    for name in expected:
        assert table[name].dtype == expected[name].dtype, name
        np.testing.assert_array_equal(table[name], expected[name], err_msg=name, strict=True)


@pytest.mark.parametrize("workers", [2, 3, 16, None])
def test_the_same_detections_in_the_same_order_as_serially(frames, serial, workers):
    seen = []
    table = detect_stack(as_stack(frames, VOXEL), 0.5, device="cpu", workers=workers,
                         progress=lambda *report: seen.append(report))
    assert len(np.unique(serial["frame"])) == SHAPE[0]  # (every frame has spots: the order is tested)
    assert_identical(table, serial)
    # the threshold's estimate (a step per sampled frame), then detection (a step per frame, in order)
    sampled = len(pipeline.frames_to_sample(SHAPE[0]))
    assert seen == ([("estimate", k + 1, sampled) for k in range(sampled)]
                    + [("detect", t + 1, SHAPE[0]) for t in range(SHAPE[0])])


def test_the_estimated_spot_size_and_tracks_as_serially(frames, monkeypatch):
    # the spot size's scales and halves, the threshold's sampled frames and the frames all on several threads
    parallel = track_stack(frames, voxel_size_um=VOXEL, spot_radius_um=None, device="cpu")
    monkeypatch.setattr("tracker.pipeline.frames_in_flight", lambda *args, **kwargs: 1)
    monkeypatch.setattr("tracker.parallel_frames.available_cores", lambda: 1)
    one_at_a_time = track_stack(frames, voxel_size_um=VOXEL, spot_radius_um=None, device="cpu")
    assert parallel.spot_scale.radius_um == one_at_a_time.spot_scale.radius_um
    assert parallel.threshold_fit is not None and parallel.threshold_fit == one_at_a_time.threshold_fit
    assert_identical(parallel.detections, one_at_a_time.detections)
    assert_identical(parallel.tracks, one_at_a_time.tracks)


@pytest.fixture
def detecting_threads(monkeypatch) -> list:
    """The thread of each call of the frame detector, in call order."""
    threads = []
    detect_spots = pipeline.detect_spots

    def recording(*args, **kwargs):
        threads.append(threading.current_thread())
        return detect_spots(*args, **kwargs)

    monkeypatch.setattr("tracker.pipeline.detect_spots", recording)
    return threads


def test_one_worker_detects_on_the_calling_thread_and_more_on_others(frames, detecting_threads):
    threads = detecting_threads
    detect_stack(as_stack(frames, VOXEL), 0.5, device="cpu", workers=1)
    assert threads == [threading.main_thread()] * SHAPE[0]
    threads.clear()
    detect_stack(as_stack(frames, VOXEL), 0.5, device="cpu", workers=2)
    assert len(threads) == SHAPE[0] and threading.main_thread() not in threads


def test_a_bad_frame_raises_the_serial_error_after_the_frames_before_it(frames):
    bad = frames.astype(np.float32)
    bad[4, 3, 10, 10] = np.nan
    bad[5, 0, 0, 0] = np.inf  # (a later bad frame, perhaps finished first: its error is not the one raised)
    errors, reports = [], []
    for workers in (1, 3):
        seen = []
        with pytest.raises(InputError) as raised:
            detect_stack(as_stack(bad, VOXEL), 0.5, device="cpu", workers=workers,
                         progress=lambda *report: report[0] == "detect" and seen.append(report[1]))
        errors.append(str(raised.value))
        reports.append(seen)
    assert errors[0] == errors[1] and "\n" not in errors[0] and "NaN" in errors[0]
    assert reports[0] == reports[1] == [1, 2, 3, 4]


def test_results_are_taken_in_order_and_the_first_error_in_order_wins():
    def detect(volume, t):
        time.sleep(0.05 if t == 0 else 0.0)  # (frame 0 finishes last)
        if t in (2, 3):
            raise ValueError(f"frame {t}")
        return volume * 10

    done = []
    map_frames_in_order(lambda t: t, detect, range(2), 3, lambda t, result: done.append((t, result)))
    assert done == [(0, 0), (1, 10)]
    done.clear()
    with pytest.raises(ValueError, match="^frame 2$"):
        map_frames_in_order(lambda t: t, detect, range(6), 3, lambda t, result: done.append(t))
    assert done == [0, 1]


def test_map_in_order_keeps_the_order_raises_the_first_error_and_does_not_nest():
    def work(item):
        time.sleep(0.05 if item == 0 else 0.0)  # (item 0 finishes last)
        if item in (2, 3):
            raise ValueError(f"item {item}")
        return threading.current_thread().name, item * 10

    results = map_in_order(work, range(2), workers=2)
    assert [value for _, value in results] == [0, 10]
    assert all(name.startswith("tracker-detect") for name, _ in results)
    assert [name for name, _ in map_in_order(work, range(2), workers=1)] == [threading.current_thread().name] * 2
    with pytest.raises(ValueError, match="^item 2$"):
        map_in_order(work, range(6), workers=3)
    # called from the pool's own threads: serially there (they would otherwise wait on each other)
    nested = map_in_order(lambda outer: map_in_order(work, range(2), workers=2), range(2), workers=2)
    assert all(name == names[0][0] for names in nested for name, _ in names)


def test_a_read_error_comes_after_the_frames_before_it():
    def read(t):
        if t == 3:
            raise OSError("truncated file")
        return t

    done = []
    with pytest.raises(OSError, match="truncated"):
        map_frames_in_order(read, lambda volume, t: volume, range(6), 4, lambda t, result: done.append(t))
    assert done == [0, 1, 2]


def test_frames_in_flight_are_bounded_by_cores_frames_and_memory(monkeypatch):
    monkeypatch.setattr("tracker.parallel_frames.available_cores", lambda: 16)
    frame = (64, 512, 512)
    per_frame = 64 * 512 * 512 * DETECTION_BYTES_PER_VOXEL
    assert frames_in_flight(frame, 100, budget=100 * per_frame) == 16
    assert frames_in_flight(frame, 100, 4, budget=100 * per_frame) == 4
    assert frames_in_flight(frame, 3, budget=100 * per_frame) == 3
    assert frames_in_flight(frame, 100, budget=5 * per_frame + 1) == 5
    assert frames_in_flight(frame, 100, budget=per_frame // 2) == 1
    assert frames_in_flight(frame, 100, 1, budget=100 * per_frame) == 1
    with pytest.raises(ValueError, match="workers must be at least 1"):
        frames_in_flight(frame, 100, 0)


def test_the_dask_task_detects_its_frame_on_its_own_thread(frames, serial, tmp_path, detecting_threads):
    """A Dask worker runs one frame per task (tracker.distributed): the task must not fan out on threads too."""
    tifffile = pytest.importorskip("tifffile")
    from tracker.distributed.detection import detect_task
    from tracker.distributed.frame_source import FrameSource

    path = tmp_path / "stack.tif"
    tifffile.imwrite(path, frames, imagej=True, metadata={"axes": "TZYX"})
    arguments = {**pipeline.DetectionParams(spot_radius_um=0.5, device="cpu").to_dict()}
    table, _, _ = detect_task(FrameSource.of(path, VOXEL), 2, arguments)
    assert detecting_threads == [threading.current_thread()]
    in_frame = serial["frame"] == 2
    np.testing.assert_array_equal(table["z"], serial["z"][in_frame])


def test_a_progress_callback_that_raises_stops_the_run(frames):
    """The napari panel cancels a run by raising from its progress callback."""

    class Cancelled(Exception):
        pass

    seen = []

    def progress(stage, done, total):
        seen.append(done)
        if done == 2:
            raise Cancelled

    with pytest.raises(Cancelled):
        detect_stack(as_stack(frames, VOXEL), 0.5, device="cpu", workers=3, progress=progress)
    assert seen == [1, 2]


def test_read_ahead_gives_every_frame_in_order_reading_the_next_one_meanwhile():
    started: list[int] = []
    reading = threading.Event()

    def read(t: int) -> int:
        started.append(t)
        if t == 1:
            reading.set()
        return 10 * t

    frames = read_ahead(read, [0, 1, 2, 3])
    t, volume = next(frames)
    assert (t, volume) == (0, 0)
    assert reading.wait(5)  # (frame 1 is read while the caller works on frame 0)
    assert list(frames) == [(1, 10), (2, 20), (3, 30)] and started == [0, 1, 2, 3]
    assert list(read_ahead(read, [])) == []


def test_read_ahead_raises_a_read_error_after_the_frames_before_it():
    def read(t: int) -> int:
        if t == 2:
            raise OSError("frame 2 is unreadable")
        return t

    seen = []
    with pytest.raises(OSError, match="frame 2"):
        for t, _ in read_ahead(read, range(4)):
            seen.append(t)
    assert seen == [0, 1]


def test_read_ahead_leaves_no_read_running_when_closed():
    finished: list[int] = []
    started = threading.Event()

    def slow_read(t: int) -> int:
        if t == 1:
            started.set()
        time.sleep(0.2)
        finished.append(t)
        return t

    frames = read_ahead(slow_read, range(5))
    assert next(frames) == (0, 0)
    assert started.wait(5)  # (frame 1 is being read now)
    frames.close()
    assert finished == [0, 1]  # (waited for, not left running)
    time.sleep(0.3)
    assert finished == [0, 1]  # (and nothing further started)
