"""napari plugin benchmark: a Tracks layer of 100k vertices opens, and an edit applies, within a second.

Run (needs a display; headless: under Xvfb):

    xvfb-run -a -s "-screen 0 1600x1000x24" python benchmarks/napari_bench.py [--vertices 100000]

Measures, in seconds (median of --repeats runs for each edit):

* ``first_layer_of_session (tiny)``: napari's one-off imports on the first layer of a session;
* ``read_csv``: the plugin reader turns a tracks CSV into layer data (CSV parse + features);
* ``open_layer``: ``viewer.add_tracks`` of that data plus the first draw of the canvas;
* ``review_setup``: the review model (TrackEdits) built from the layer and pushed back into it;
* each edit (delete, split, join, reassign) and its undo and redo: the edit model, the
  layer update (data, features, colours) and the redraw of the canvas; "(without redraw)"
  stops the clock before the repaint (which, headless, is Mesa's software rasteriser).

Then the link review (issue 29), on tracks the tracker linked (``--vertices`` points simulated, about 100 frames;
``--review-only`` skips the part above):

* ``relink (core)``: :func:`tracker.linking.relink` forbidding the least confident link (window of the defaults);
* ``reject (model)``: the plugin's decision, the re-solve and its one edit of the model;
* ``reject``: the same from the viewer (``LinkReview.reject``: model, layer update in place, redraw), and its undo;
* ``next link``: the queue moves to the next doubtful link (after the undo of a rejection: the queue's keys of the
  changed model included): the frame, camera, selection, link marks and the redraw as :func:`draw` does it (the
  step's paint and a second, forced one, as measured by the earlier stops); "(its one paint)" stops the clock
  when the canvas has painted once, the paint the step asked for; ``next link (queue model)`` the queue alone.
  Medians of ``--repeats``, and the worst (``(worst)``); "(CPU time of the process)": the CPU seconds the step
  used in this process (Mesa's rendering threads included).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def synthetic_tracks(n_vertices: int, n_frames: int = 50, seed: int = 0) -> dict[str, np.ndarray]:
    """Random-walk tracks of ``n_frames`` points each, ``track run`` columns, sorted by frame."""
    from napari_tracker._live_tracks import squared_links

    rng = np.random.default_rng(seed)
    n_tracks = max(1, n_vertices // n_frames)
    start = rng.uniform((0, 0, 0), (20, 200, 200), size=(n_tracks, 3))
    steps = rng.normal(0, 0.3, size=(n_tracks, n_frames, 3))
    xyz = (start[:, None, :] + np.cumsum(steps, axis=1)).reshape(-1, 3)
    table = {
        "track_id": np.repeat(np.arange(n_tracks), n_frames).astype(np.int64),
        "frame": np.tile(np.arange(n_frames), n_tracks).astype(np.int64),
        "z": xyz[:, 0], "y": xyz[:, 1], "x": xyz[:, 2],
        "intensity": rng.uniform(10, 50, len(xyz)),
        "quality": rng.uniform(5, 20, len(xyz)),
    }
    table["link_cost"] = squared_links(table)
    table["link_confidence"] = np.where(np.isnan(table["link_cost"]), np.nan, rng.uniform(0.5, 1, len(xyz)))
    order = np.lexsort((table["track_id"], table["frame"]))
    return {k: v[order] for k, v in table.items()}


def _tiny_layer():
    from napari_tracker._edits import TrackEdits
    from napari_tracker._layers import tracks_layer_data, tracks_layer_kwargs

    data, features, graph = tracks_layer_data(TrackEdits(synthetic_tracks(100, n_frames=10)))
    return data, tracks_layer_kwargs("warm-up", features, graph), "tracks"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vertices", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--review-only", action="store_true", help="only the link review's measurements")
    args = parser.parse_args()

    import napari
    from qtpy.QtWidgets import QApplication
    from tracker.io import write_table

    from napari_tracker._reader import read
    from napari_tracker._review import TrackReview

    results: dict[str, float | int | str] = {"vertices": args.vertices, "napari": napari.__version__}
    viewer = napari.Viewer(show=True)
    app = QApplication.instance()

    canvas = viewer.window._qt_viewer.canvas.native

    def draw() -> None:
        """Process pending events and repaint the canvas now (no read-back). The pending events hold the
        step's own paint of the canvas; the forced repaint is a second, whole one (about 30 ms headless)."""
        app.processEvents()
        canvas.repaint()
        app.processEvents()

    draw()
    if args.review_only:
        link_review_section(viewer, draw, args, results)
        return report(results, args)
    # The first layer of a session pays one-off imports inside napari (scipy.spatial, pint): ~1 s.
    warm_data, warm_kwargs, _ = _tiny_layer()
    start = time.perf_counter()
    warm = viewer.add_tracks(warm_data, **warm_kwargs)
    draw()
    results["first_layer_of_session (tiny)"] = time.perf_counter() - start
    viewer.layers.remove(warm)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tracks.csv"
        write_table(path, synthetic_tracks(args.vertices))
        start = time.perf_counter()
        (data, kwargs, _), = read(str(path))
        results["read_csv"] = time.perf_counter() - start

    start = time.perf_counter()
    layer = viewer.add_tracks(data, **kwargs)
    viewer.dims.set_point(0, 25)
    results["open_layer (without first draw)"] = time.perf_counter() - start
    draw()
    results["open_layer"] = time.perf_counter() - start
    start = time.perf_counter()
    viewer.screenshot(canvas_only=True, flash=False)
    results["screenshot (render + read-back)"] = time.perf_counter() - start

    from napari_tracker._corrections import TrackCorrections

    start = time.perf_counter()
    review = TrackReview(viewer, layer)
    fix = TrackCorrections(review, bind_keys=False)
    draw()
    results["review_setup"] = time.perf_counter() - start

    def timed(name: str, action) -> None:
        keys = (name, f"{name}+undo", f"{name}+redo")
        times: dict[str, list[float]] = {k: [] for k in keys}
        no_draw: dict[str, list[float]] = {k: [] for k in keys}
        for _ in range(args.repeats):
            for key, step in zip(keys, (action, review.undo, review.redo)):
                start = time.perf_counter()
                assert step() is not False, key
                no_draw[key].append(time.perf_counter() - start)
                draw()
                times[key].append(time.perf_counter() - start)
            review.undo()
            draw()
        for key in keys:
            results[key] = statistics.median(times[key])
            results[f"{key} (without redraw)"] = statistics.median(no_draw[key])

    ids = review.edits.track_ids()
    a, b = int(ids[len(ids) // 2]), int(ids[len(ids) // 2 + 1])
    timed("delete_track", lambda: fix.delete_track(a))
    timed("split_track", lambda: fix.split_track(a, 25))
    fix.split_track(a, 25)
    fix.split_track(b, 25)
    draw()
    head, tail = a, int(review.edits.track_ids().max())  # tail: b's second half, the newest id
    timed("join_tracks", lambda: fix.join_tracks(head, tail))
    row = review.edits.point_at(a, 10)
    timed("reassign_point", lambda: fix.reassign_point(row, b))
    review.close()
    viewer.layers.remove(layer)
    link_review_section(viewer, draw, args, results)
    report(results, args)


def linked_tracks(n_points: int, seed: int = 0) -> dict[str, np.ndarray]:
    """About ``n_points`` simulated points over 100 frames, linked by the tracker (gate 1.5 µm)."""
    from tracker.linking import link_detections
    from tracker.simulate import simulate_tracks

    n_frames = 100
    truth = simulate_tracks(n_particles=int(n_points / n_frames * 1.2), n_frames=n_frames,
                            field_of_view_um=(20.0, 66.0, 66.0), step_um=0.5, seed=seed)
    return link_detections({k: truth[k] for k in ("frame", "z", "y", "x")}, 1.5)


def link_review_section(viewer, draw, args, results) -> None:
    """The review queue and a rejection with its local re-solve, on tracker-linked tracks."""
    from tracker.linking import relink

    from napari_tracker._decisions import LinkDecisions
    from napari_tracker._edits import TrackEdits
    from napari_tracker._layers import tracks_layer_data, tracks_layer_kwargs
    from napari_tracker._link_review import LinkReview
    from napari_tracker._review import TrackReview
    from napari_tracker._review_queue import ReviewQueue

    tracks = linked_tracks(args.vertices)
    results["review: linked points"] = len(tracks["frame"])
    options = {"max_displacement_um": 1.5}
    order = np.argsort(np.nan_to_num(tracks["link_confidence"], nan=2.0))
    rows = [int(r) for r in order[: args.repeats]]
    pred = {int(j): int(j) - 1 for j in rows}  # (sorted by track, frame: a link comes from the row before)
    times = []
    for row in rows:
        start = time.perf_counter()
        relink(tracks, forbidden=[(pred[row], row)], **options)
        times.append(time.perf_counter() - start)
    results["relink (core)"] = statistics.median(times)
    edits = TrackEdits(tracks)
    decisions = LinkDecisions(edits, options)
    times = []
    for row in rows:
        start = time.perf_counter()
        decisions.reject(row)
        times.append(time.perf_counter() - start)
        edits.undo()
    results["reject (model)"] = statistics.median(times)
    queue = ReviewQueue(edits)
    queue.links()
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        queue.next()
        times.append(time.perf_counter() - start)
    results["next link (queue model)"] = statistics.median(times)

    data, features, graph = tracks_layer_data(TrackEdits(tracks))
    layer = viewer.add_tracks(data, **tracks_layer_kwargs("linked", features, graph, parameters=options))
    review = TrackReview(viewer, layer, bind_keys=False)
    links = LinkReview(review, bind_keys=False)
    draw()
    from qtpy.QtWidgets import QApplication

    app, canvas = QApplication.instance(), viewer.window._qt_viewer.canvas.native
    paints = []
    viewer.window._qt_viewer.canvas._scene_canvas.events.draw.connect(lambda event: paints.append(1))

    def paint_once() -> None:
        """Process events until the canvas has painted once (the paint the step asked for)."""
        painted = len(paints)
        app.processEvents()
        if len(paints) == painted:  # (nothing was pending: ask for the paint)
            canvas.update()
            while len(paints) == painted:
                app.processEvents()

    steps: dict[str, list[float]] = {k: [] for k in ("next link", "reject", "reject+undo")}
    one_paint: dict[str, list[float]] = {k: [] for k in steps}
    no_draw: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(args.repeats):
        for key, step in (("next link", links.next_link), ("reject", links.reject),
                          ("reject+undo", review.undo)):
            start, start_cpu = time.perf_counter(), time.process_time()
            outcome = step()
            assert outcome is not None and outcome is not False, key
            no_draw[key].append(time.perf_counter() - start)
            paint_once()
            one_paint[key].append(time.perf_counter() - start)
            canvas.repaint()  # (the rest of draw(): the measurement of the earlier stops)
            app.processEvents()
            steps[key].append(time.perf_counter() - start)
            cpu[key].append(time.process_time() - start_cpu)
    for key in steps:
        results[key] = statistics.median(steps[key])
        results[f"{key} (worst)"] = max(steps[key])
        results[f"{key} (its one paint)"] = statistics.median(one_paint[key])
        results[f"{key} (its one paint, worst)"] = max(one_paint[key])
        results[f"{key} (without redraw)"] = statistics.median(no_draw[key])
        results[f"{key} (without redraw, worst)"] = max(no_draw[key])
        results[f"{key} (CPU time of the process)"] = statistics.median(cpu[key])
    # The floor of any move to another frame: napari re-slicing its layers (the time slider moved by hand).
    times = []
    for k in range(args.repeats):
        start = time.perf_counter()
        viewer.dims.set_point(0, 10 + 7 * k)
        times.append(time.perf_counter() - start)
    results["napari frame change alone (without redraw)"] = statistics.median(times)
    links.close()
    review.close()
    viewer.close()


def report(results, args) -> None:
    width = max(len(k) for k in results)
    for key, value in results.items():
        shown = f"{value:.3f} s" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {shown}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
