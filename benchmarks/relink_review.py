"""A simulated reviewer: how the local re-solve of a rejection (``tracker.linking.relink``) changes the tracks.

Simulated particles are linked by the tracker; the reviewer then rejects, one at a time, the least confident
link that the ground truth calls wrong (the napari plugin's *Reject + re-solve*: the link is forbidden, the
frames around it are linked again with every earlier rejection as a constraint), 100 times. Counted: the
rejections after which the tracks hold fewer wrong links (the re-solve fixed or cut the link without breaking
another) and those after which they hold more, and the link F1 before and after.

    python benchmarks/relink_review.py [--radius 0.5 1.0] [--window 0] [--rejections 100]

Without ``--radius``, relink's default window (:data:`tracker.linking.relink.DEFAULT_RADIUS_STEPS`).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

CASES = {"step 0.6 µm, gate 2 µm": (0.6, 2.0), "step 0.9 µm, gate 3 µm": (0.9, 3.0)}
"""Root-mean-square step per frame and gate of each case (1,400 particles, 30 frames, 10 x 40 x 40 µm)."""


def review(step_um: float, gate_um: float, rejections: int, options: dict) -> dict:
    from tracker.linking import link_detections
    from tracker.metrics import evaluate, link_correctness
    from tracker.simulate import simulate_tracks

    from napari_tracker._decisions import LinkDecisions
    from napari_tracker._edits import TrackEdits

    truth = simulate_tracks(n_particles=1400, n_frames=30, field_of_view_um=(10, 40, 40), step_um=step_um, seed=1)
    tracks = link_detections({k: truth[k] for k in ("frame", "z", "y", "x")}, gate_um)
    edits = TrackEdits(tracks)
    decisions = LinkDecisions(edits, {"max_displacement_um": gate_um, **options})
    before = evaluate(edits.output_table(), truth)["link_f1"]
    fewer = more = 0
    seconds = []
    wrong = int(np.count_nonzero(link_correctness(edits.table(), truth) == 0))
    for _ in range(rejections):
        live = edits.rows()
        rows = live[link_correctness(edits.table(), truth) == 0]
        if not len(rows):
            break
        row = int(rows[np.argmin(np.nan_to_num(edits.column("link_confidence")[rows], nan=2.0))])
        start = time.perf_counter()
        decisions.reject(row)
        seconds.append(time.perf_counter() - start)
        now = int(np.count_nonzero(link_correctness(edits.table(), truth) == 0))
        fewer += now < wrong
        more += now > wrong
        wrong = now
    return {"points": len(tracks["frame"]), "f1_before": before,
            "f1_after": evaluate(edits.output_table(), truth)["link_f1"],
            "fewer": fewer, "more": more, "n": len(seconds), "median_s": float(np.median(seconds))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--radius", type=float, nargs="*", default=[None], help="window reach (µm); default relink's")
    parser.add_argument("--window", type=int, default=None, help="frames either side; default relink's")
    parser.add_argument("--rejections", type=int, default=100)
    args = parser.parse_args()
    print("| case | radius (µm) | rejections | fewer wrong links after | more | link F1 before → after | median s |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: |")
    for name, (step, gate) in CASES.items():
        for radius in args.radius:
            options = {k: v for k, v in (("radius_um", radius), ("window", args.window)) if v is not None}
            r = review(step, gate, args.rejections, options)
            print(f"| {name} ({r['points']} points) | {'default' if radius is None else radius} | {r['n']} | "
                  f"{r['fewer']} | {r['more']} | {r['f1_before']:.4f} → {r['f1_after']:.4f} | {r['median_s']:.3f} |")


if __name__ == "__main__":
    main()
