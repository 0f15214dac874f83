"""``track run`` on a Dask cluster (tracker.distributed): memory, identity and throughput.

Three measurements, each a sub-command writing a Markdown table (``--out``):

``memory``
    A Zarr stack larger than the memory given to all the workers together is tracked on a local cluster of
    ``--workers`` processes limited to ``--worker-memory`` GB each: it must run to the end with every worker's
    peak resident memory under its limit (and no worker restarted), and give the tracks of the single-process
    run (made in a separate process, whose peak memory is reported too).
``scaling``
    Detection throughput (frames/s) of one stack on local clusters of 1, 2, 4, … workers (one thread each),
    the spot radius given (so that every run does the same work); then, on the largest cluster, the whole run
    (spot scale estimated, detection, linking on the client) of ``--frames-e2e`` frames.
``blocks``
    Linking alone, of simulated detections (``--frames`` × ``--particles``): one linking in this process against
    time blocks linked in parallel on ``--workers`` workers (:mod:`tracker.distributed.time_blocks`), for
    several block lengths: time, and the link F1 of the blocks' tracks against the one linking's.
``e2e``
    ``track run`` (the command, in a fresh process each time: cluster start, spot scale estimated, detection,
    linking on the client, the tracks written) on ``--frames`` frames at each of ``--workers`` worker counts; the
    tracks files must be identical. With ``--one-worker-frames K`` one worker runs the first K frames only and
    its whole-stack time is extrapolated (detection in proportion to the frames, the rest as measured).
``gpu``
    The plain GPU run (``track_stack(device="gpu")``) against one Dask-CUDA worker (``--gpus``) and one plain
    Dask worker process on the GPU, on the same frames: the same tracks, and the time (median of ``--repeats``).

The stacks are simulated (:mod:`tracker.simulate`) and rendered on the cluster's workers straight into the Zarr
store, a block of frames per task, so that no process holds them whole.

Usage::

    python benchmarks/distributed_bench.py memory --frames 512 --shape 32,256,256 --workers 2 --worker-memory 0.75
    python benchmarks/distributed_bench.py scaling --frames 32 --shape 64,512,512 --workers 1,2,4,8,16
    python benchmarks/distributed_bench.py blocks --frames 1000 --particles 500 --workers 2 --blocks 100,250
    python benchmarks/distributed_bench.py e2e --frames 100 --shape 64,512,512 --workers 16,8,4,2,1 \
        --one-worker-frames 10
    python benchmarks/distributed_bench.py gpu --frames 100 --shape 64,512,512 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracker.distributed import FrameSource, dask_client, detect_on_cluster, track_on_cluster  # noqa: E402
from tracker.params import ClusterParams, DetectionParams  # noqa: E402

VOXEL = (0.5, 0.2, 0.2)
PSF_SIGMA = (0.5, 0.2, 0.2)
DENSITY_PER_UM3 = 0.004
"""Particles per µm³ of the simulated volume (about 1,340 in 64×512×512 voxels of 0.5×0.2×0.2 µm, 170 in
32×256×256)."""
RENDER_BLOCK = 4
"""Frames rendered per task."""


def peak_rss_mb() -> float:
    """This process's peak resident memory (MB, 10⁶ bytes; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def simulated_truth(n_frames: int, shape: tuple[int, int, int], seed: int = 1) -> dict:
    from tracker.simulate import simulate_tracks

    field = tuple(n * v for n, v in zip(shape, VOXEL))
    n_particles = max(10, int(DENSITY_PER_UM3 * np.prod(field)))
    return simulate_tracks(n_particles, n_frames, field, 0.35, 0.5, seed=seed)


def render_block(path: str, truth: dict, shape: tuple[int, int, int], start: int, stop: int) -> int:
    """On a worker: render frames ``start:stop`` and write them to the Zarr array at ``path``."""
    import zarr

    from tracker.simulate import render_stack

    rows = (truth["frame"] >= start) & (truth["frame"] < stop)
    block = {name: column[rows] for name, column in truth.items()}
    block["frame"] = block["frame"] - start
    frames = render_stack(block, (stop - start, *shape), VOXEL, PSF_SIGMA, snr=8, seed=1000 + start)
    zarr.open_array(path, mode="r+")[start:stop] = frames
    return stop - start


def write_stack(path: Path, n_frames: int, shape: tuple[int, int, int], client) -> float:
    """A Zarr stack (one chunk per frame, Zarr's default compression) rendered on ``client``'s workers; GB."""
    import zarr

    if path.exists():
        shutil.rmtree(path)
    zarr.create_array(str(path), shape=(n_frames, *shape), dtype="uint16", chunks=(1, *shape))
    truth = client.scatter(simulated_truth(n_frames, shape), broadcast=True)
    futures = [client.submit(render_block, str(path), truth, shape, start, min(start + RENDER_BLOCK, n_frames))
               for start in range(0, n_frames, RENDER_BLOCK)]
    assert sum(client.gather(futures)) == n_frames
    return n_frames * int(np.prod(shape)) * 2 / 1e9


def worker_peaks(client) -> dict[str, tuple[int, float]]:
    """Each worker's process id and peak resident memory (MB)."""
    return client.run(lambda: (os.getpid(), peak_rss_mb()))


def same_tracks(first: dict, second: dict) -> bool:
    return list(first) == list(second) and all(np.array_equal(first[k], second[k], equal_nan=True) for k in first)


def single_process(path: Path, tracks_file: Path, device: str) -> dict:
    """``track_stack`` in a fresh process (its own peak memory); the tracks saved to ``tracks_file``."""
    code = (f"import json, sys, time, numpy as np; sys.path.insert(0, {str(ROOT)!r});"
            f"from benchmarks.distributed_bench import peak_rss_mb, VOXEL;"
            f"from tracker.io import read_stack; from tracker.pipeline import track_stack;"
            f"t0 = time.perf_counter();"
            f"r = track_stack(read_stack({str(path)!r}, voxel_size=VOXEL), device={device!r});"
            f"np.savez({str(tracks_file)!r}, **r.tracks);"
            f"print(json.dumps({{'seconds': time.perf_counter() - t0, 'detect': r.timings['detect'],"
            f"'link': r.timings['link'], 'peak_mb': peak_rss_mb(), 'points': len(r.tracks['frame']),"
            f"'tracks': r.n_tracks}}))")
    output = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def memory(args) -> None:
    shape = args.shape
    cluster = ClusterParams(workers=args.workers, worker_memory_gb=args.worker_memory)
    path = Path(args.store)
    with dask_client(cluster) as client:
        started = time.perf_counter()
        gigabytes = write_stack(path, args.frames, shape, client)
        print(f"wrote {gigabytes:.2f} GB in {time.perf_counter() - started:.0f} s", flush=True)
    on_disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e9
    single = single_process(path, Path(args.store + ".single.npz"), "cpu")
    print("single process:", single, flush=True)
    with dask_client(cluster) as client:  # (a fresh cluster: the peaks are the tracking's alone)
        before = worker_peaks(client)
        started = time.perf_counter()
        result = track_on_cluster(path, client=client, voxel_size_um=VOXEL,
                                  detection=DetectionParams(device="cpu"))
        seconds = time.perf_counter() - started
        after = worker_peaks(client)
    expected = dict(np.load(args.store + ".single.npz"))
    identical = same_tracks(result.tracks, expected)
    restarted = sorted(set(before) ^ set(after)) or [a for a in before if before[a][0] != after[a][0]]
    limit_mb = args.worker_memory * 1e3
    peaks = [peak for _, peak in after.values()]
    lines = [
        f"## Memory: {args.frames} frames of {'×'.join(map(str, shape))} uint16 = {gigabytes:.2f} GB "
        f"({on_disk:.2f} GB compressed on disk), {args.workers} workers of {args.worker_memory:g} GB "
        f"({args.workers * args.worker_memory:g} GB together)",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores (shared with other jobs while measured).",
        "",
        "| run | time (s) | detect (s) | link (s) | peak memory (MB) | points | tracks |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: |",
        f"| single process (`track_stack`) | {single['seconds']:.1f} | {single['detect']:.1f} | {single['link']:.2f} "
        f"| {single['peak_mb']:.0f} | {single['points']} | {single['tracks']} |",
        f"| {args.workers} workers (`track_on_cluster`) | {seconds:.1f} | {result.timings['detect']:.1f} "
        f"| {result.timings['link']:.2f} | workers {', '.join(f'{p:.0f}' for p in peaks)} (limit {limit_mb:.0f}); "
        f"client {peak_rss_mb():.0f} | {len(result.tracks['frame'])} | {result.n_tracks} |",
        "",
        f"Identical tracks (every column): **{identical}**. Workers' peak under the limit: "
        f"**{max(peaks) < limit_mb}**; workers restarted: {len(restarted)}.",
        "",
    ]
    finish(args, lines)
    shutil.rmtree(path)
    os.unlink(args.store + ".single.npz")


def scaling(args) -> None:
    shape = args.shape
    path = Path(args.store)
    counts = [int(n) for n in args.workers.split(",")]
    gigabytes = ensure_stack(path, max(args.frames, args.frames_e2e), shape, max(counts))
    from tracker.io import read_stack
    from tracker.pipeline import detect_stack

    radius = (0.85, 0.33, 0.33)  # (µm; what the estimate gives on these stacks)
    detection = DetectionParams(device="cpu", spot_radius_um=radius)
    stack = read_stack(path, voxel_size=VOXEL)
    lines = [
        f"## Detection throughput: {args.frames} frames of {'×'.join(map(str, shape))} (Zarr), spot radius given",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores; one thread per worker process.",
        "",
        "| workers | detect (s) | frames/s | speed-up vs 1 worker | detections | peak worker memory (MB) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    started = time.perf_counter()
    reference = detect_stack(_first_frames(stack, 2), detection=detection)
    plain_per_frame = (time.perf_counter() - started) / 2
    print(f"single process: {plain_per_frame:.2f} s per frame", flush=True)
    base = None
    source = FrameSource.of(_subset_store(path, args.frames), VOXEL)
    for n in counts:
        with dask_client(ClusterParams(workers=n)) as client:
            client.wait_for_workers(n)
            client.run(_warm_up, source, detection)  # (imports and first-call costs, paid once per worker)
            started = time.perf_counter()
            detections, _, _ = detect_on_cluster(client, source, detection)
            seconds = time.perf_counter() - started
            peak = max(p for _, p in worker_peaks(client).values())
        base = base or seconds
        lines.append(f"| {n} | {seconds:.1f} | {args.frames / seconds:.2f} | {base / seconds:.1f} | "
                     f"{len(detections['frame'])} | {peak:.0f} |")
        print(lines[-1], flush=True)
        assert np.array_equal(detections["x"][: len(reference["x"])], reference["x"])
    lines += ["", f"Single process, no cluster: {plain_per_frame:.2f} s per frame (first 2 frames; the same "
                  f"detections as the cluster's).", ""]
    if not args.frames_e2e:
        finish(args, lines)
        return
    with dask_client(ClusterParams(workers=max(counts))) as client:
        client.wait_for_workers(max(counts))
        client.run(_warm_up, source, detection)
        started = time.perf_counter()
        result = track_on_cluster(path, client=client, voxel_size_um=VOXEL, detection=DetectionParams(device="cpu"))
        seconds = time.perf_counter() - started
    n_points = len(result.detections["frame"])
    lines += [
        f"## End to end: {stack.n_frames} frames of {'×'.join(map(str, shape))} ({gigabytes:.2f} GB) on "
        f"{max(counts)} workers",
        "",
        "| stage | seconds | |",
        "| --- | ---: | --- |",
        f"| spot scale + detection (workers) | {result.timings['detect']:.1f} | "
        f"{stack.n_frames / result.timings['detect']:.2f} frames/s |",
        f"| linking (client, one process) | {result.timings['link']:.2f} | "
        f"{n_points / max(result.timings['link'], 1e-9):.0f} detections/s, {n_points} detections, "
        f"{result.n_tracks} tracks |",
        f"| total | {seconds:.1f} | |",
        "",
    ]
    finish(args, lines)


def _warm_up(source: FrameSource, detection: DetectionParams) -> None:
    """On each worker: detect frame 0 once (imports, first-call costs), as a long run pays them once."""
    from tracker.distributed.detection import detect_task

    detect_task(source, 0, detection.to_dict())


def _first_frames(stack, n):
    from tracker.stack import Stack

    return Stack(stack.data[:n], stack.voxel_size)


def _subset_store(path: Path, n_frames: int) -> Path:
    """A Zarr store of the first ``n_frames`` frames of ``path`` (copied chunk files: no decoding)."""
    import zarr

    source = zarr.open_array(str(path), mode="r")
    if source.shape[0] == n_frames:
        return path
    subset = path.with_name(path.stem + f"_{n_frames}.zarr")
    if subset.exists():
        shutil.rmtree(subset)
    target = zarr.create_array(str(subset), shape=(n_frames, *source.shape[1:]), dtype=source.dtype,
                               chunks=source.chunks)
    for t in range(n_frames):
        target[t] = source[t]
    return subset


def blocks(args) -> None:
    from tracker.distributed import LINK_OVERLAP_FRAMES, link_in_time_blocks
    from tracker.linking import link_detections
    from tracker.params import LinkingParams
    from tracker.simulate import simulate_tracks

    truth = simulate_tracks(args.particles, args.frames, (10.0, 60.0, 60.0), 0.4, 0.6, blink_probability=0.03,
                            seed=3)
    visible = truth["visible"].astype(bool)
    noise = np.random.default_rng(0).normal(0, 0.03, (int(visible.sum()), 3))
    table = {"frame": truth["frame"][visible], **{a: truth[a][visible] + noise[:, k] for k, a in enumerate("zyx")}}
    order = np.argsort(table["frame"], kind="stable")
    table = {**{name: column[order] for name, column in table.items()}, "point": np.arange(len(order))}
    n_points = len(order)
    workers = int(args.workers)
    lines = [
        f"## Linking in time blocks: {args.frames} frames, {n_points} points (simulated, 3 % blinking), "
        f"{workers} workers, overlap {LINK_OVERLAP_FRAMES} frames",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores.",
        "",
        "| motion | linking | seconds | points/s | link F1 vs one linking | links differing |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    lengths = [int(b) for b in args.blocks.split(",")]
    with dask_client(ClusterParams(workers=workers)) as client:
        client.wait_for_workers(workers)
        for options in ({"motion": "persistent"}, {"motion": "none", "adaptive_radius": False, "max_gap": 0}):
            linking = LinkingParams(max_displacement_um=1.5, **options)
            started = time.perf_counter()
            whole = link_detections(table, **linking.to_dict())
            seconds = time.perf_counter() - started
            label = "persistent (defaults)" if len(options) == 1 else "none, fixed radius, no gaps"
            lines.append(f"| {label} | one, on the client | {seconds:.1f} | {n_points / seconds:.0f} | 1 | 0 |")
            print(lines[-1], flush=True)
            expected = _links(whole)
            for length in lengths:
                started = time.perf_counter()
                tracks, _ = link_in_time_blocks(client, table, linking, length)
                seconds = time.perf_counter() - started
                found = _links(tracks)
                f1 = 2 * len(expected & found) / (len(expected) + len(found))
                lines.append(f"| {label} | blocks of {length} frames | {seconds:.1f} | {n_points / seconds:.0f} | "
                             f"{f1:.5f} | {len(expected ^ found)} |")
                print(lines[-1], flush=True)
    lines.append("")
    finish(args, lines)


def _links(tracks) -> set[tuple[int, int]]:
    track, point = np.asarray(tracks["track_id"]), np.asarray(tracks["point"])
    same = track[1:] == track[:-1]
    return set(zip(point[:-1][same].tolist(), point[1:][same].tolist()))


def ensure_stack(path: Path, n_frames: int, shape: tuple[int, int, int], workers: int) -> float:
    """The benchmark's Zarr stack at ``path`` (rendered on ``workers`` local workers unless one of this frame
    shape and at least ``n_frames`` frames is there); its size in GB."""
    import zarr

    if path.exists():
        there = zarr.open_array(str(path), mode="r").shape
        if there[1:] == shape and there[0] >= n_frames:  # (a run of fewer frames uses the first ones)
            return there[0] * int(np.prod(shape)) * 2 / 1e9
    with dask_client(ClusterParams(workers=workers)) as client:
        started = time.perf_counter()
        gigabytes = write_stack(path, n_frames, shape, client)
    print(f"wrote {gigabytes:.2f} GB in {time.perf_counter() - started:.0f} s", flush=True)
    return gigabytes


def run_command(path: Path, output: Path, options: list[str]) -> tuple[float, dict[str, float]]:
    """``track run`` in a fresh process: its wall time (s, interpreter start included) and the times it reports."""
    import re

    command = [sys.executable, "-m", "tracker.cli", "run", str(path), "-o", str(output), "--overwrite",
               "--voxel-size", ",".join(map(str, VOXEL)), "--device", "cpu", *options]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ,
                               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"track run failed: {done.stderr.strip().splitlines()[-1]}")
    times = re.search(r"time: detect ([0-9.]+) s, link ([0-9.]+) s, total ([0-9.]+) s", done.stderr)
    return seconds, dict(zip(("detect", "link", "total"), map(float, times.groups())))


def e2e(args) -> None:
    shape = args.shape
    path = Path(args.store)
    counts = [int(n) for n in args.workers.split(",")]
    gigabytes = ensure_stack(path, args.frames, shape, max(counts))
    lines = [
        f"## End to end: `track run --workers N` on {args.frames} frames of {'×'.join(map(str, shape))} "
        f"({gigabytes:.2f} GB Zarr)",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores; each run a fresh `track run` process (cluster start, "
        f"spot scale estimated on one worker, detection on the workers, linking on the client, CSV written).",
        "",
        "| workers | frames run | wall (s) | detect (s) | link (s) | speed-up vs 1 worker | tracks file |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    reference = None
    rows = {}
    for n in counts:
        subset = args.one_worker_frames if n == 1 and args.one_worker_frames else args.frames
        source = _subset_store(path, subset)
        output = Path(f"{args.store}.tracks_{n}.csv")
        if subset == args.frames:
            wall, times = run_command(source, output, ["--workers", str(n)])
            text = output.read_text()
            reference = reference or text
            rows[n] = (wall, times, "identical" if text == reference else "**differs**")
        else:  # (one worker on the first frames; the whole stack's detection extrapolated)
            estimate, per_frame = one_worker_rates(source)
            measured = [r for r in rows.values() if r[2] == "identical"]
            link = measured[0][1]["link"] if measured else args.link_seconds
            overhead = min((w - t["detect"] - t["link"] for w, t, _ in measured), default=args.overhead_seconds)
            detect = estimate + per_frame * (args.frames - 1)
            rows[n] = (overhead + detect + link, {"detect": detect, "link": link},
                       f"extrapolated: {estimate:.1f} s (spot scale + first frame) + {per_frame:.2f} s per frame "
                       f"(measured on {subset} frames) × {args.frames - 1} frames; link and start-up as measured")
        print(n, rows[n], flush=True)
    base = rows[1][0] if 1 in rows else None
    for n in counts:
        wall, times, note = rows[n]
        speed = f"{base / wall:.1f}" if base else "–"
        frames = args.one_worker_frames if n == 1 and args.one_worker_frames else args.frames
        lines.append(f"| {n} | {frames} | {wall:.1f} | {times['detect']:.1f} | {times['link']:.2f} | {speed} "
                     f"| {note} |")
    lines.append("")
    finish(args, lines)


def one_worker_rates(path: Path) -> tuple[float, float]:
    """One worker's time to the first frame detected (spot scale estimated, then a frame; s), and its time per
    further frame (s), from the detection progress of ``track_on_cluster`` on the stack at ``path``."""
    stamps = []
    with dask_client(ClusterParams(workers=1)) as client:
        client.wait_for_workers(1)
        started = time.perf_counter()
        track_on_cluster(path, client=client, voxel_size_um=VOXEL, detection=DetectionParams(device="cpu"),
                         progress=lambda stage, done, total: stamps.append(time.perf_counter())
                         if stage == "detect" else None)
    frames = len(stamps)
    return stamps[0] - started, (stamps[-1] - stamps[0]) / max(frames - 1, 1)


def gpu(args) -> None:
    from tracker.io import read_stack
    from tracker.pipeline import track_stack

    shape = args.shape
    path = Path(args.store)
    ensure_stack(path, args.frames, shape, 8)
    detection = DetectionParams(device="gpu")

    def median_time(run) -> tuple[float, object]:
        started = time.perf_counter()
        run()  # (warm-up: kernels compiled and cached, the worker's imports)
        print(f"  warm-up {time.perf_counter() - started:.1f} s", flush=True)
        times, result = [], None
        for _ in range(args.repeats):
            started = time.perf_counter()
            result = run()
            times.append(time.perf_counter() - started)
            print(f"  run {times[-1]:.2f} s {result.timings}", flush=True)
        return float(np.median(times)), result

    plain_seconds, plain = median_time(lambda: track_stack(read_stack(path, voxel_size=VOXEL), detection=detection))
    print(f"plain GPU run: {plain_seconds:.2f} s", flush=True)
    rows = [("`track_stack(device='gpu')`, this process", plain_seconds, plain, "")]
    import dask
    import distributed  # noqa: F401  (its configuration's defaults loaded before one is changed)

    from tracker.distributed import detection as dask_detection, pipeline as dask_pipeline

    variants = {
        "gpus": ("`--gpus`: one Dask-CUDA worker (`LocalCUDACluster`)", ClusterParams(gpus=True), {}),
        "gpus-no-trim": ("`--gpus`, the workers without `MALLOC_TRIM_THRESHOLD_`", ClusterParams(gpus=True),
                         {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}),
        "workers": ("`--workers 1`: one plain Dask worker process on the GPU", ClusterParams(workers=1), {}),
        "workers-no-trim": ("`--workers 1`, the worker without `MALLOC_TRIM_THRESHOLD_`", ClusterParams(workers=1),
                            {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}),
    }
    for name in args.variants.split(","):
        # "gpus/f16": runs of 16 frames per task; "gpus/no-next": the next run's first frame not read ahead.
        base, *options = name.split("/")
        label, cluster, config = variants[base]
        per_task = next((int(o[1:]) for o in options if o.startswith("f")), dask_detection.GPU_FRAMES_PER_TASK)
        read_next = "no-next" not in options
        label += f", runs of {per_task} frames" + ("" if read_next else ", next run's first frame not read ahead")
        dask_pipeline.GPU_FRAMES_PER_TASK, dask_detection.READ_NEXT_RUN = per_task, read_next
        os.environ.pop("MALLOC_TRIM_THRESHOLD_", None)  # (a nanny of this process set it: its workers inherit it)
        visible_before = os.environ.get("CUDA_VISIBLE_DEVICES")
        if "gpu0" in options:  # (Dask-CUDA starts one worker per GPU it sees)
            os.environ["CUDA_VISIBLE_DEVICES"] = "0"
            label += ", GPU 0 alone"
        try:
            with dask.config.set(config), dask_client(cluster) as client:
                client.wait_for_workers(1)
                seconds, result = median_time(lambda: track_on_cluster(path, client=client, voxel_size_um=VOXEL,
                                                                       detection=detection))
                with distributed.get_task_stream(client=client) as stream:  # (one more run, profiled)
                    profiled = track_on_cluster(path, client=client, voxel_size_um=VOXEL, detection=detection)
                visible = client.run(lambda: (os.environ.get("CUDA_VISIBLE_DEVICES", "(all)"),
                                              os.environ.get("MALLOC_TRIM_THRESHOLD_", "(unset)")))
                placed = {}  # (detect tasks per worker, in the profiled run)
                for record in stream.data:
                    if str(record["key"]).startswith("tracker-detect-"):
                        placed[record["worker"]] = placed.get(record["worker"], 0) + 1
        except Exception as error:  # (reported in the table: why this kind of worker could not run)
            rows.append((label, float("nan"), None, f"failed: {type(error).__name__}: {error}"))
            print(rows[-1], flush=True)
            continue
        finally:
            dask_pipeline.GPU_FRAMES_PER_TASK = dask_detection.GPU_FRAMES_PER_TASK
            dask_detection.READ_NEXT_RUN = True
            if visible_before is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = visible_before
        workers = "; ".join(f"worker {i}: CUDA_VISIBLE_DEVICES={devices}, {placed.get(address, 0)} detect tasks"
                            for i, (address, (devices, _)) in enumerate(sorted(visible.items())))
        trim_value = next(iter(visible.values()))[1]
        rows.append((label, seconds, result, f"{workers}; MALLOC_TRIM_THRESHOLD_={trim_value}; "
                                             f"{task_profile(stream.data, profiled.timings['detect'])}"))
        print(label, seconds, rows[-1][3], flush=True)
    lines = [
        f"## One GPU: {args.frames} frames of {'×'.join(map(str, shape))}, the plain run against one Dask worker "
        f"on the GPU (warm; median of {args.repeats})",
        "",
        "| run | total (s) | detect (s) | detect per frame (ms) | link (s) | tracks | identical to the plain run "
        "| time vs plain | note |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for label, seconds, result, note in rows:
        if result is None:
            lines.append(f"| {label} | – | – | – | – | – | – | – | {note} |")
            continue
        lines.append(f"| {label} | {seconds:.2f} | {result.timings['detect']:.2f} | "
                     f"{1000 * result.timings['detect'] / args.frames:.0f} | {result.timings['link']:.2f} | "
                     f"{result.n_tracks} | {same_tracks(result.tracks, plain.tracks)} | {seconds / plain_seconds:.2f} "
                     f"| {note} |")
    lines.append("")
    finish(args, lines)


def task_profile(records: list[dict], detect_seconds: float) -> str:
    """Where a run's detection time went on the workers, from Dask's task stream: the spot-scale task, the detect
    tasks' compute time (in all, and the most and least per task) and the idle time between them."""
    spans = {}
    for record in records:
        compute = [s for s in record["startstops"] if s["action"] == "compute"]
        if compute:
            spans.setdefault(str(record["key"]).split("-")[1], []).append((compute[0]["start"], compute[-1]["stop"]))
    detect = sorted(spans.get("detect", []))
    if not detect:
        return "no task stream"
    busy = [stop - start for start, stop in detect]
    gaps = [later[0] - earlier[1] for earlier, later in zip(detect, detect[1:])]
    scale = spans.get("spot", [(0.0, 0.0)])[0]
    return (f"profiled run: detect {detect_seconds:.2f} s = spot scale {scale[1] - scale[0]:.2f} s, "
            f"{len(detect)} detect tasks computing {sum(busy):.2f} s ({min(busy):.2f}–{max(busy):.2f} s each), "
            f"idle between them {sum(gaps):.2f} s, from the spot scale's end to the first task "
            f"{detect[0][0] - scale[1]:.2f} s")


def finish(args, lines: list[str]) -> None:
    text = "\n".join(lines)
    print(text, flush=True)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["memory", "scaling", "blocks", "e2e", "gpu"])
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--frames-e2e", type=int, default=0, help="scaling: frames of the end-to-end run")
    parser.add_argument("--shape", type=lambda s: tuple(int(v) for v in s.split(",")), default=(64, 512, 512))
    parser.add_argument("--workers", default="2", help="memory: a number; scaling: a list, e.g. 1,2,4,8,16")
    parser.add_argument("--worker-memory", type=float, default=0.75, help="GB per worker (memory)")
    parser.add_argument("--particles", type=int, default=500, help="blocks: simulated particles")
    parser.add_argument("--blocks", default="100,250", help="blocks: block lengths (frames)")
    parser.add_argument("--one-worker-frames", type=int, default=0,
                        help="e2e: frames one worker runs (its whole-stack time extrapolated); 0: all")
    parser.add_argument("--link-seconds", type=float, default=float("nan"),
                        help="e2e, one worker alone: the link time of a measured run of all frames")
    parser.add_argument("--overhead-seconds", type=float, default=float("nan"),
                        help="e2e, one worker alone: a measured run's wall time less its detect and link times")
    parser.add_argument("--repeats", type=int, default=3, help="gpu: timed runs of each kind (median)")
    parser.add_argument("--variants", default="gpus,gpus-no-trim,workers",
                        help="gpu: the Dask workers to time against the plain run (gpus, gpus-no-trim, workers, "
                             "workers-no-trim; each with /fN: runs of N frames per task, /no-next: the next run's "
                             "first frame not read ahead, /gpu0: GPU 0 alone; e.g. gpus/f40,gpus/no-next,gpus/gpu0)")
    parser.add_argument("--store", default="/tmp/distributed_bench.zarr")
    parser.add_argument("--out", help="append the Markdown table to this file")
    args = parser.parse_args()
    if args.mode == "memory":
        args.workers = int(args.workers)
    {"memory": memory, "scaling": scaling, "blocks": blocks, "e2e": e2e, "gpu": gpu}[args.mode](args)


if __name__ == "__main__":
    main()
