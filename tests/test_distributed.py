"""Tracking on a Dask cluster (tracker.distributed): a 2-worker local cluster gives the single-process run's
tracks, survives a worker that dies, and reports progress and errors as a local run does."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from click.testing import CliRunner

distributed = pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr", minversion="3")
cloudpickle = pytest.importorskip("cloudpickle")

from tracker.cli import main  # noqa: E402
from tracker.distributed import FrameSource, dask_client, track_on_cluster  # noqa: E402
from tracker.distributed.cluster import check_cluster, import_distributed  # noqa: E402
from tracker.errors import InputError  # noqa: E402
from tracker.io import read_stack  # noqa: E402
from tracker.params import ClusterParams, DetectionParams, LinkingParams  # noqa: E402
from tracker.pipeline import track_stack  # noqa: E402
from tracker.simulate import render_stack, simulate_tracks  # noqa: E402
from tracker.stack import FrameArray, Stack  # noqa: E402

VOXEL = (0.5, 0.2, 0.2)
SHAPE = (12, 16, 64, 64)  # (T, Z, Y, X)
CLUSTER = ClusterParams(workers=2, worker_memory_gb=0.6)

# The workers unpickle this module's source class by value (they need not import the test module).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def stack_path(tmp_path_factory):
    """A Zarr stack of 12 frames, one chunk per frame, with moving spots (the voxel size given separately)."""
    field = tuple(n * v for n, v in zip(SHAPE[1:], VOXEL))
    frames = render_stack(simulate_tracks(25, SHAPE[0], field, 0.3, 0.5, seed=1), SHAPE, VOXEL, (0.5, 0.2, 0.2),
                          snr=8, seed=2)
    path = tmp_path_factory.mktemp("zarr") / "stack.zarr"
    array = zarr.create_array(str(path), shape=frames.shape, dtype=frames.dtype, chunks=(1, *SHAPE[1:]))
    array[:] = frames
    return path


@pytest.fixture(scope="module")
def client():
    with dask_client(CLUSTER) as started:
        yield started


@pytest.fixture(scope="module")
def single(stack_path):
    return track_stack(read_stack(stack_path, voxel_size=VOXEL), device="cpu")


def assert_same_tables(result, expected):
    assert list(result) == list(expected)
    for name, column in expected.items():
        np.testing.assert_array_equal(result[name], column, err_msg=name)


@pytest.mark.parametrize("motion", ["persistent", "none"])
def test_two_workers_give_the_single_process_tracks(stack_path, client, single, motion):
    assert len(client.scheduler_info()["workers"]) == 2
    expected = single if motion == "persistent" else track_stack(read_stack(stack_path, voxel_size=VOXEL),
                                                                 device="cpu", motion=motion)
    calls = []
    result = track_on_cluster(stack_path, client=client, voxel_size_um=VOXEL, detection=DetectionParams(device="cpu"),
                              linking=LinkingParams(motion=motion), progress=lambda *call: calls.append(call))
    assert len(expected.tracks["frame"]) > 100 and expected.n_tracks > 10
    assert_same_tables(result.detections, expected.detections)
    assert_same_tables(result.tracks, expected.tracks)
    assert result.spot_scale == expected.spot_scale  # estimated once, on a worker, from the same frames
    assert result.threshold_fit is not None and str(result.threshold_fit) == str(expected.threshold_fit)
    assert calls[:2] == [("estimate", 1, 2), ("estimate", 2, 2)]  # the spot size, the threshold: a task each
    detect = [call for call in calls if call[0] == "detect"]
    assert detect == [("detect", done, SHAPE[0]) for done in range(1, SHAPE[0] + 1)]
    assert calls[2 + len(detect)][0] == "link"  # then the linker's stages, on the client


def test_tiff_stacks_are_read_by_the_workers_too(stack_path, client, single, tmp_path):
    from tracker.io import write_stack

    write_stack(tmp_path / "stack.tif", zarr.open_array(str(stack_path), mode="r")[:], VOXEL)
    result = track_on_cluster(tmp_path / "stack.tif", client=client, detection=DetectionParams(device="cpu"))
    assert_same_tables(result.tracks, single.tracks)


def test_a_channel_and_a_folder_of_planes_are_read_by_the_workers_too(stack_path, client, single, tmp_path):
    """``--channel`` of a two-channel OME-TIFF, and a folder of one plane per file (as the ISBI challenge's), on
    the workers: the single-process tracks of the one-channel stack."""
    import tifffile

    frames = zarr.open_array(str(stack_path), mode="r")[:]
    two = tmp_path / "two.ome.tif"
    tifffile.imwrite(two, np.stack([frames // 2, frames], axis=1), ome=True, metadata={"axes": "TCZYX"})
    result = track_on_cluster(two, client=client, voxel_size_um=VOXEL, channel=1,
                              detection=DetectionParams(device="cpu"))
    assert_same_tables(result.tracks, single.tracks)
    planes = tmp_path / "planes"
    planes.mkdir()
    for t, volume in enumerate(frames):
        for z, plane in enumerate(volume):
            tifffile.imwrite(planes / f"movie t{t:03d} z{z:02d}.tif", plane)
    result = track_on_cluster(planes, client=client, voxel_size_um=VOXEL, detection=DetectionParams(device="cpu"))
    assert_same_tables(result.tracks, single.tracks)


@dataclass(frozen=True)
class DyingSource(FrameSource):
    """A source whose worker dies (the whole process) the first time it reads frame ``fatal``."""

    marker: str = ""
    fatal: int = 5

    def open(self) -> Stack:
        stack = read_stack(self.path, voxel_size=self.voxel_size)

        def read_frame(t: int) -> np.ndarray:
            if t == self.fatal and not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os._exit(1)
            return stack.frame(t)

        return Stack(FrameArray(stack.shape, stack.dtype, read_frame), stack.voxel_size)


@dataclass(frozen=True)
class BrokenSource(FrameSource):
    """A source whose frame 3 cannot be read (as a missing chunk of a store)."""

    def open(self) -> Stack:
        stack = read_stack(self.path, voxel_size=self.voxel_size)

        def read_frame(t: int) -> np.ndarray:
            if t == 3:
                raise KeyError("c/3/0/0/0")
            return stack.frame(t)

        return Stack(FrameArray(stack.shape, stack.dtype, read_frame), stack.voxel_size)


def test_a_worker_error_is_one_line_naming_the_frame(stack_path, client):
    from tracker.distributed import detect_on_cluster

    with pytest.raises(RuntimeError, match=r"^frame 3 failed on a worker: KeyError: 'c/3/0/0/0'$"):
        detect_on_cluster(client, BrokenSource(str(stack_path), VOXEL), DetectionParams(device="cpu",
                                                                                       spot_radius_um=0.5))


def test_a_worker_that_dies_is_replaced_and_no_frame_is_lost_or_doubled(stack_path, client, single, tmp_path):
    from tracker.distributed import detect_on_cluster

    marker = tmp_path / "died"
    source = DyingSource(str(stack_path), VOXEL, marker=str(marker))
    detections, _, _ = detect_on_cluster(client, source, DetectionParams(device="cpu",
                                                                      spot_radius_um=single.spot_scale.radius_um))
    assert marker.exists()  # (a worker did die on frame 5)
    assert_same_tables(detections, single.detections)
    client.wait_for_workers(2, timeout=30)  # (the nanny restarts it for the next tests)


def test_runs_of_frames_per_task_give_the_single_process_detections(stack_path, client, single, tmp_path):
    """GPU workers detect runs of frames per task (each next frame read during a detection): the same tables,
    gathered or kept on the workers, also when a worker dies in a run (12 frames in runs of 5: 5, 5, 2)."""
    from tracker.distributed import detect_frames_on_cluster, detect_on_cluster
    from tracker.tables import concat_tables

    detection = DetectionParams(device="cpu", spot_radius_um=single.spot_scale.radius_um)
    with distributed.get_task_stream(client=client) as stream:
        gathered, _, _ = detect_on_cluster(client, FrameSource.of(stack_path, VOXEL), detection, frames_per_task=5)
    assert_same_tables(gathered, single.detections)
    ran_on = {str(r["key"]).rsplit("-", 2)[1]: r["worker"] for r in stream.data
              if str(r["key"]).startswith("tracker-detect-")}
    assert ran_on["5"] == ran_on["10"] != ran_on["0"]  # (two chains: runs 0-4 | 5-9, 10-11 on one worker)
    kept, _, _ = detect_frames_on_cluster(client, FrameSource.of(stack_path, VOXEL), detection, frames_per_task=5)
    assert len(kept.futures) == 12 and kept.counts.sum() == len(single.detections["frame"])
    assert_same_tables(concat_tables(client.gather(kept.futures)), single.detections)
    marker = tmp_path / "died"
    dying, _, _ = detect_on_cluster(client, DyingSource(str(stack_path), VOXEL, marker=str(marker)), detection,
                                 frames_per_task=5)
    assert marker.exists()
    assert_same_tables(dying, single.detections)
    client.wait_for_workers(2, timeout=30)
    with pytest.raises(ValueError, match="frames_per_task must be at least 1"):
        detect_on_cluster(client, FrameSource.of(stack_path, VOXEL), detection, frames_per_task=0)


READS: list[int] = []  # (frames read by CountingSource, in this process)


@dataclass(frozen=True)
class CountingSource(FrameSource):
    """A source that records each frame read (in this process), and whose frame ``broken`` cannot be read."""

    broken: int = -1

    def open(self) -> Stack:
        stack = read_stack(self.path, voxel_size=self.voxel_size)

        def read_frame(t: int) -> np.ndarray:
            READS.append(t)
            if t == self.broken:
                raise KeyError(f"c/{t}/0/0/0")
            return stack.frame(t)

        return Stack(FrameArray(stack.shape, stack.dtype, read_frame), stack.voxel_size)


def test_a_run_reads_the_next_runs_first_frame_for_the_next_task(stack_path, single):
    """With read_next, a run's task reads the next run's first frame during its last detection; the next task on
    the process takes it instead of reading it again, a task of another run drops it; the tables are the same."""
    from tracker.distributed.detection import detect_run_task
    from tracker.tables import concat_tables

    arguments = DetectionParams(device="cpu", spot_radius_um=single.spot_scale.radius_um).to_dict()
    source = CountingSource(str(stack_path), VOXEL)
    READS.clear()
    runs = [detect_run_task(source, 0, 5, arguments, True), detect_run_task(source, 5, 10, arguments, True)]
    assert READS == list(range(11))  # (frame 5 read once, by the first task; frame 10 read ahead)
    READS.clear()
    runs.append(detect_run_task(source, 10, 12, arguments, True))  # (the last run: nothing after it to read)
    assert READS == [11]
    tables = [table for run in runs for table, _, _ in run]
    assert_same_tables(concat_tables(tables), single.detections)
    READS.clear()
    detect_run_task(source, 0, 3, arguments, True)  # (frame 3 read ahead)
    again = detect_run_task(source, 7, 9, arguments, True)  # (another run: frame 3 dropped, 9 read ahead)
    assert READS == [0, 1, 2, 3, 7, 8, 9]
    assert_same_tables(concat_tables([table for table, _, _ in again]), concat_tables(tables[7:9]))
    detect_run_task(source, 0, 1, arguments, False)  # (frame 9 dropped; nothing read ahead)
    from tracker.distributed.detection import _chained_runs  # (each worker's runs: consecutive, one chain)

    assert _chained_runs(5, 1) == [None, 0, 1, 2, 3] and _chained_runs(5, 2) == [None, 0, None, 2, 3]
    assert _chained_runs(2, 4) == [None, None] and _chained_runs(3, 0) == [None, 0, 1]
    broken = CountingSource(str(stack_path), VOXEL, broken=3)
    detect_run_task(broken, 0, 3, arguments, True)  # (frame 3's read fails ahead: the error is the next run's)
    with pytest.raises(KeyError, match="c/3/0/0/0"):
        detect_run_task(broken, 3, 6, arguments, True)


def test_command_line_workers_write_the_single_process_files(stack_path, tmp_path):
    runner = CliRunner()
    options = ["--voxel-size", "0.5,0.2,0.2", "--device", "cpu", "-q"]
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    assert runner.invoke(main, ["run", str(stack_path), "-o", str(one), *options]).exit_code == 0
    result = runner.invoke(main, ["run", str(stack_path), "-o", str(two), *options, "--workers", "2",
                                  "--worker-memory", "0.6"])
    assert result.exit_code == 0, result.output
    assert two.read_text() == one.read_text()
    assert (tmp_path / "two.params.toml").read_text() == (tmp_path / "one.params.toml").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.csv", "one.params.toml", "two.csv", "two.params.toml"]


def test_command_line_scheduler_uses_an_existing_cluster(stack_path, client, tmp_path):
    options = ["--voxel-size", "0.5,0.2,0.2", "--device", "cpu", "--motion", "none"]
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    alone = CliRunner().invoke(main, ["run", str(stack_path), "-o", str(one), *options])
    assert alone.exit_code == 0
    result = CliRunner().invoke(main, ["run", str(stack_path), "-o", str(two), *options,
                                       "--scheduler", client.scheduler.address, "--link-blocks", "4"])
    assert result.exit_code == 0, result.output
    # the summary names the stack's threshold as the single process's does (estimated on a worker)
    threshold = [line for line in alone.output.splitlines() if line.startswith("threshold: ")]
    assert len(threshold) == 1 and threshold[0] in result.output.splitlines()
    assert len(client.scheduler_info()["workers"]) == 2  # (the cluster outlives the command)
    first, second = (np.loadtxt(path, delimiter=",", skiprows=1) for path in (one, two))
    assert first.shape == second.shape and first.shape[0] > 100
    columns = one.read_text().splitlines()[0].split(",")
    same = [k for k, name in enumerate(columns) if name not in ("track_id", "link_cost", "link_confidence")]
    points = [table[:, same][np.lexsort(table[:, same].T[::-1])] for table in (first, second)]
    np.testing.assert_array_equal(points[1], points[0])  # (every point once; the links: see the blocks' test)


def test_errors_are_one_line(stack_path, client, tmp_path, monkeypatch):
    blank = tmp_path / "blank.zarr"
    zarr.create_array(str(blank), shape=(3, 4, 16, 16), dtype="u2", chunks=(1, 4, 16, 16), fill_value=7)
    with pytest.raises(InputError, match="every frame of the stack is constant"):  # (raised by the workers' results)
        track_on_cluster(blank, client=client, voxel_size_um=VOXEL,
                         detection=DetectionParams(device="cpu", spot_radius_um=0.5))
    with pytest.raises(ValueError, match="give one of --workers, --scheduler and --gpus"):
        check_cluster(ClusterParams(workers=2, scheduler="tcp://127.0.0.1:1"))
    with pytest.raises(ValueError, match="--worker-memory needs --workers or --gpus"):
        check_cluster(ClusterParams(worker_memory_gb=1.0))
    result = CliRunner().invoke(main, ["run", str(stack_path), "-o", str(tmp_path / "t.csv"), "--workers", "2",
                                       "--scheduler", "tcp://127.0.0.1:1"])
    assert result.exit_code == 1 and result.output.strip().count("\n") == 0 and "give one of" in result.output
    assert not (tmp_path / "t.csv").exists()
    monkeypatch.setitem(sys.modules, "distributed", None)  # (as where the extra is not installed)
    with pytest.raises(InputError, match=r"pip install 'tracker3d\[distributed\]'"):
        import_distributed()


@pytest.fixture(scope="module")
def simulated_detections():
    """Points of 60 particles over 90 frames (3 % blinking), with localisation noise, in frame order."""
    truth = simulate_tracks(60, 90, (6.0, 25.0, 25.0), 0.4, 0.6, blink_probability=0.03, seed=5)
    visible = truth["visible"].astype(bool)
    noise = np.random.default_rng(0).normal(0, 0.03, (int(visible.sum()), 3))
    table = {"frame": truth["frame"][visible], **{a: truth[a][visible] + noise[:, k] for k, a in enumerate("zyx")}}
    order = np.argsort(table["frame"], kind="stable")
    return {**{name: column[order] for name, column in table.items()}, "point": np.arange(len(order))}


def links(tracks) -> set[tuple[int, int]]:
    track, point = np.asarray(tracks["track_id"]), np.asarray(tracks["point"])
    same = track[1:] == track[:-1]
    return set(zip(point[:-1][same].tolist(), point[1:][same].tolist()))


@pytest.mark.parametrize("options, identical", [
    ({"motion": "none", "adaptive_radius": False, "max_gap": 0}, True),  # frame-to-frame assignments alone
    ({}, False),  # the defaults: motion, scatter, missed detections and gap evidence estimated per block
])
def test_time_blocks_stitched_at_their_boundaries(client, simulated_detections, options, identical):
    from tracker.distributed import link_in_time_blocks
    from tracker.linking import link_detections

    linking = LinkingParams(max_displacement_um=1.5, **options)
    whole = link_detections(simulated_detections, **linking.to_dict())
    calls = []
    blocks, summary = link_in_time_blocks(client, simulated_detections, linking, 20,
                                          progress=lambda *call: calls.append(call))
    assert calls == [("link", done, 5) for done in range(1, 6)]  # (90 frames: 5 blocks)
    assert sorted(blocks["point"]) == list(range(len(simulated_detections["frame"])))  # every point once
    assert list(blocks) == list(whole)
    track, frame = np.asarray(blocks["track_id"]), np.asarray(blocks["frame"])
    assert np.all((np.diff(track) > 0) | ((np.diff(track) == 0) & (np.diff(frame) > 0)))  # sorted, forward in time
    a, b = links(whole), links(blocks)
    assert len(a) > 3000
    if identical:  # the same tracks and link costs; confidences are scaled by each block's own statistics
        assert_same_tables({k: v for k, v in blocks.items() if k != "link_confidence"},
                           {k: v for k, v in whole.items() if k != "link_confidence"})
        np.testing.assert_allclose(blocks["link_confidence"], whole["link_confidence"], atol=0.05)
    else:
        assert 2 * len(a & b) / (len(a) + len(b)) >= 0.999


def test_gpus_start_one_dask_cuda_worker_per_gpu(monkeypatch):
    import types

    class Started(Exception):
        pass

    def local_cuda_cluster(**options):
        raise Started(options)

    monkeypatch.setitem(sys.modules, "dask_cuda", types.SimpleNamespace(LocalCUDACluster=local_cuda_cluster))
    with pytest.raises(Started) as started, dask_client(ClusterParams(gpus=True, worker_memory_gb=2.5)):
        pass
    options = started.value.args[0]
    assert options["threads_per_worker"] == 1 and options["memory_limit"] == 2_500_000_000
    monkeypatch.setitem(sys.modules, "dask_cuda", None)  # (not installed)
    with pytest.raises(InputError, match="--gpus needs dask-cuda"):
        with dask_client(ClusterParams(gpus=True)):
            pass


@pytest.mark.gpu
def test_gpus_give_the_plain_gpu_runs_tracks_with_one_worker_per_gpu(stack_path):
    """``--gpus``: one Dask-CUDA worker per visible GPU, each on its own GPU, and the plain GPU run's tracks."""
    pytest.importorskip("dask_cuda")
    import cupy

    expected = track_stack(read_stack(stack_path, voxel_size=VOXEL), device="gpu")
    n_gpus = cupy.cuda.runtime.getDeviceCount()
    with dask_client(ClusterParams(gpus=True)) as client:
        client.wait_for_workers(n_gpus, timeout=60)
        first_visible = client.run(lambda: os.environ["CUDA_VISIBLE_DEVICES"].split(",")[0])
        assert sorted(first_visible.values()) == [str(i) for i in range(n_gpus)]
        with distributed.get_task_stream(client=client) as stream:
            result = track_on_cluster(stack_path, client=client, voxel_size_um=VOXEL,
                                      detection=DetectionParams(device="gpu"))
    assert_same_tables(result.detections, expected.detections)
    assert_same_tables(result.tracks, expected.tracks)
    detected_on = {r["worker"] for r in stream.data if str(r["key"]).startswith("tracker-detect-")}
    assert len(detected_on) == min(n_gpus, 2)  # (12 frames: two runs, each on a worker of its own)


def test_time_blocks_share_one_estimated_gate(client, simulated_detections):
    """Without a gate, one is estimated from all the detections and used by every block (not one per block)."""
    from tracker.distributed import link_in_time_blocks
    from tracker.linking import link_detections
    from tracker.linking.gate import estimate_gate

    linking = LinkingParams(max_displacement_um=None)
    gate = estimate_gate(simulated_detections, solver=linking.solver)
    whole, whole_summary = link_detections(simulated_detections, return_summary=True, **linking.to_dict())
    blocks, summary = link_in_time_blocks(client, simulated_detections, linking, 30)
    assert summary.gate == gate and whole_summary.gate.value_um == gate.value_um
    a, b = links(whole), links(blocks)
    assert 2 * len(a & b) / (len(a) + len(b)) >= 0.999


def test_the_gate_is_estimated_from_a_bounded_part_of_the_frames(client, simulated_detections, monkeypatch):
    """The blocks' gate is one linking's, estimated on a worker from the frames it looks at alone (each frame's
    counts and extremes reach the client): at most MAX_POINTS points, whatever the stack's length."""
    from tracker.distributed import FrameTables
    from tracker.distributed.time_blocks import gate_frames
    from tracker.linking import gate as gate_module
    from tracker.tables import concat_tables

    monkeypatch.setattr(gate_module, "MAX_FRAME_PAIRS", 6)  # (of 89: the bound must show on a small table)
    table = {k: v for k, v in simulated_detections.items()}
    frames, starts, counts = np.unique(table["frame"], return_index=True, return_counts=True)
    parts = [{k: v[s:s + c] for k, v in table.items()} for s, c in zip(starts, counts)]
    futures = client.scatter(parts, hash=False)
    for known in (None, [gate_module.GateInputs.of(part) for part in parts]):  # (on the workers / from detection)
        whole, looked_at = gate_frames(client, FrameTables(futures, counts, known))
        assert 6 <= len(looked_at) <= 12 and np.array_equal(whole.counts, counts)
        sample = concat_tables([parts[i] for i in looked_at])
        assert len(sample["frame"]) < len(table["frame"]) / 6
        assert gate_module.estimate_gate(sample, whole=whole) == gate_module.estimate_gate(table)
    with pytest.raises(ValueError, match="lack points of a frame"):
        gate_module.estimate_gate(concat_tables([parts[i] for i in looked_at[1:]]), whole=whole)


@pytest.mark.parametrize("options, identical", [
    ({"motion": "none", "adaptive_radius": False, "max_gap": 0}, True),
    # --motion none alone: the blocks' own radii and gap evidence agree with one linking's on this stack (not
    # promised in general: link F1 >= 0.999 is)
    ({"motion": "none"}, True),
    ({}, False),
])
def test_time_blocks_from_the_workers_detections(stack_path, client, options, identical):
    """With --link-blocks the detections stay on the workers: the blocks' tracks equal one linking's (the same
    tracks with frame-to-frame assignment alone, else link F1 >= 0.999), and the detections the single run's."""
    linking = LinkingParams(**options)
    expected = track_stack(read_stack(stack_path, voxel_size=VOXEL), device="cpu", linking=linking)
    calls = []
    result = track_on_cluster(stack_path, cluster=ClusterParams(link_block_frames=3), client=client,
                              voxel_size_um=VOXEL, detection=DetectionParams(device="cpu"), linking=linking,
                              progress=lambda *call: calls.append(call))
    assert [call for call in calls if call[0] == "link"] == [("link", k, 4) for k in range(1, 5)]  # (12 frames)
    assert_same_tables(result.detections, expected.detections)
    assert result.linking.gate == expected.linking.gate  # (estimated once, on a worker, from all the frames)
    point = {name: np.asarray(column) for name, column in expected.tracks.items()}
    key = [tuple(row) for row in np.column_stack([point[a] for a in ("frame", "z", "y", "x")]).tolist()]
    ids = {k: i for i, k in enumerate(key)}
    for tracks in (expected.tracks, result.tracks):
        tracks["point"] = np.array([ids[tuple(r)] for r in np.column_stack(
            [np.asarray(tracks[a]) for a in ("frame", "z", "y", "x")]).tolist()])
    a, b = links(expected.tracks), links(result.tracks)
    assert len(a) > 150
    if identical:
        assert_same_tables({k: v for k, v in result.tracks.items() if k != "link_confidence"},
                           {k: v for k, v in expected.tracks.items() if k != "link_confidence"})
    else:
        assert 2 * len(a & b) / (len(a) + len(b)) >= 0.999


def test_time_blocks_reach_the_client_one_block_at_a_time(client, simulated_detections):
    """The client's memory while linking in time blocks is bounded by a block, not by the whole table: traced
    (tracemalloc: NumPy's arrays included; the local scheduler's own records, ~1 MB here, too) it stays under
    half the table (measured: 2.6 of 9.1 MB), where gathering the frames' tables, as the client used to, takes
    more than the table (19.8 MB)."""
    import tracemalloc

    from tracker.distributed import FrameTables, assemble_tracks, stream_time_blocks
    from tracker.linking import link_detections
    from tracker.tables import concat_tables

    copies = 64  # (of the field, side by side: 228k points, 9.1 MB)
    big = {k: np.tile(v, copies) for k, v in simulated_detections.items()}
    big["x"] = big["x"] + np.repeat(np.arange(copies) * 40.0, len(simulated_detections["x"]))
    order = np.argsort(big["frame"], kind="stable")
    big = {k: v[order] for k, v in big.items()}
    big["point"] = np.arange(len(order))
    frames, starts, counts = np.unique(big["frame"], return_index=True, return_counts=True)
    parts = [{k: v[s:s + c] for k, v in big.items()} for s, c in zip(starts, counts)]
    table_bytes = sum(v.nbytes for v in big.values())
    futures = client.scatter(parts, hash=False)
    linking = LinkingParams(max_displacement_um=1.5, motion="none", adaptive_radius=False, max_gap=0)
    sizes, chunks = [], []
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        stream_time_blocks(client, FrameTables(futures, counts), linking, 3, lambda chunk: sizes.append(
            sum(np.asarray(v).nbytes for v in chunk.values())), overlap=2)
        streamed = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        gathered_table = concat_tables(client.gather(futures))
        gathered = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del gathered_table
    assert len(sizes) == 30 and max(sizes) < table_bytes / 12  # (90 frames: 30 blocks of 3)
    assert streamed < table_bytes / 2 < table_bytes < gathered, (streamed, table_bytes, gathered)
    stream_time_blocks(client, FrameTables(futures, counts), linking, 3, chunks.append, overlap=2)
    whole = link_detections(big, **linking.to_dict())
    assert_same_tables({k: v for k, v in assemble_tracks(chunks).items() if k != "link_confidence"},
                       {k: v for k, v in whole.items() if k != "link_confidence"})


def test_a_sink_needs_time_blocks(stack_path, client):
    with pytest.raises(ValueError, match="only when linked in time blocks"):
        track_on_cluster(stack_path, client=client, voxel_size_um=VOXEL, sink=print)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_command_line_link_blocks_writes_block_by_block(stack_path, tmp_path, suffix):
    """``track run --link-blocks`` writes the tracks (and detections) as the blocks come, atomically: the same
    rows as the single-process files (in time order rather than by track), the same detections file."""
    from tracker.io import read_table

    options = ["--voxel-size", "0.5,0.2,0.2", "--device", "cpu", "--motion", "none", "--no-adaptive-radius",
               "--max-gap", "0"]
    one, two = tmp_path / f"one{suffix}", tmp_path / f"two{suffix}"
    assert CliRunner().invoke(main, ["run", str(stack_path), "-o", str(one), "-q", *options,
                                     "--detections", str(tmp_path / "one_det.csv")]).exit_code == 0
    result = CliRunner().invoke(main, ["run", str(stack_path), "-o", str(two), *options, "--workers", "2",
                                       "--worker-memory", "0.6", "--link-blocks", "3",
                                       "--detections", str(tmp_path / "two_det.csv")])
    assert result.exit_code == 0, result.output
    first, second = read_table(one), read_table(two)
    assert list(second) == list(first) and len(first["frame"]) > 100
    assert not np.array_equal(second["track_id"], first["track_id"])  # (time order, block by block)
    for table in (first, second):
        order = np.lexsort((table["frame"], table["track_id"]))
        table.update({k: np.asarray(v)[order] for k, v in table.items()})
    assert_same_tables({k: v for k, v in second.items() if k != "link_confidence"},
                       {k: v for k, v in first.items() if k != "link_confidence"})
    assert (tmp_path / "two_det.csv").read_text() == (tmp_path / "one_det.csv").read_text()
    n_tracks = len(np.unique(first["track_id"]))
    assert f"{len(first['frame'])} detections" in result.output and f"{n_tracks} tracks" in result.output
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_command_line_link_blocks_writes_geff_block_by_block(stack_path, tmp_path):
    """``track run --link-blocks -o tracks.geff`` streams the GEFF group: the single-process run's graph and
    metadata (the estimated gate and spot size in its parameters; only the node ids, in time order, differ)."""
    import json

    pytest.importorskip("geff")
    from tracker.io.geff import read_geff

    options = ["--voxel-size", "0.5,0.2,0.2", "--device", "cpu", "--motion", "none", "--no-adaptive-radius",
               "--max-gap", "0", "-q"]
    one, two = tmp_path / "one.geff", tmp_path / "two.geff"
    assert CliRunner().invoke(main, ["run", str(stack_path), "-o", str(one), *options]).exit_code == 0
    result = CliRunner().invoke(main, ["run", str(stack_path), "-o", str(two), *options, "--workers", "2",
                                       "--worker-memory", "0.6", "--link-blocks", "3"])
    assert result.exit_code == 0, result.output
    first, second = read_geff(one), read_geff(two)
    assert len(first["frame"]) > 100
    assert_same_tables({k: v for k, v in second.items() if k != "link_confidence"},
                       {k: v for k, v in first.items() if k != "link_confidence"})
    np.testing.assert_allclose(second["link_confidence"], first["link_confidence"], atol=0.05)
    assert json.loads((two / ".zattrs").read_text()) == json.loads((one / ".zattrs").read_text())
    assert not np.array_equal(np.asarray(zarr.open_array(str(two / "nodes/props/track_id/values"))[:]),
                              np.asarray(zarr.open_array(str(one / "nodes/props/track_id/values"))[:]))


def test_block_writer_leaves_nothing_on_an_error(tmp_path):
    from tracker.distributed.block_writer import streamed_outputs

    (tmp_path / "old.csv").write_text("kept\n")
    with pytest.raises(RuntimeError, match="a worker died"), streamed_outputs(tmp_path / "old.csv", tmp_path / "d.csv",
                                                                              overwrite=True) as sink:
        sink({"track_id": np.array([0, 1]), "frame": np.array([0, 0]), "x": np.array([1.0, 2.0]),
              "link_cost": np.array([np.nan, np.nan]), "link_confidence": np.array([np.nan, np.nan])})
        raise RuntimeError("a worker died")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.csv"] and (tmp_path / "old.csv").read_text() == "kept\n"
    with streamed_outputs(tmp_path / "new.csv", None) as sink:
        sink({"track_id": np.array([0, 1]), "frame": np.array([0, 0]), "x": np.array([1.0, 2.0]),
              "x_vox": np.array([5.0, 10.0]), "link_cost": np.array([np.nan, np.nan]),
              "link_confidence": np.array([np.nan, np.nan])})
        sink({"track_id": np.array([1, 0]), "frame": np.array([1, 1]), "x": np.array([2.5, 1.5]),
              "x_vox": np.array([12.5, 7.5]), "link_cost": np.array([0.25, 0.25]),
              "link_confidence": np.array([0.9, 0.8])})
        assert not (tmp_path / "new.csv").exists()  # (written whole, at the end)
    assert sink.n_points == 4 and sink.n_tracks == 2
    assert (tmp_path / "new.csv").read_text().splitlines() == [
        "track_id,frame,x,link_cost,link_confidence", "0,0,1,nan,nan", "1,0,2,nan,nan", "1,1,2.5,0.25,0.9",
        "0,1,1.5,0.25,0.8"]  # (as tracker.io.write_table writes rows)
