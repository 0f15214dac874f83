"""Where the thresholds' floor (3.5) binds, and what a floor from the stack's own quality mixture does there.

For each stack: the spot radius estimated as ``track run`` does, the stack's
quality mixture fitted (:func:`tracker.quality_mixture.estimate_threshold`),
its threshold by the range's F1 maximum alone (``old``: clipped to 3.5-8) and
by :func:`tracker.quality_mixture.mixture_threshold` (``new``: below 3.5 down to
the mixture's even level). ``screen`` (grid / held-out stacks of
``detect_bench.py`` and ``detect_generalization.py``): only the fit, then
detection (old and new) where the two differ. ``isbi``: ISBI-2012-like families
(``tracker.scenarios``), 2D as 1-plane 3D; defaults old and new through
``track_stack`` (detection R/P, link F1), and the detection oracle (one
detection at threshold 2.5, kept above each level: close spots split as at
2.5, an approximation of re-running at each level).

Usage::

    python benchmarks/threshold_floor.py isbi vesicle 2 150 [--frames 30]
    python benchmarks/threshold_floor.py screen grid|held-out|generalization [--only i,j]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tracker import quality_mixture  # noqa: E402
from tracker.detect import detect_spots  # noqa: E402
from tracker.metrics import evaluate, match_points  # noqa: E402
from tracker.pipeline import track_stack  # noqa: E402
from tracker.spot_scale import estimate_spot_radius, frames_to_sample  # noqa: E402

NEW = quality_mixture.mixture_threshold


def _old(*args, **kwargs):
    return NEW(*args, **{**kwargs, "floor": False})


def fits(stack, voxel, radius):
    """The stack's mixture fit, old and new thresholds (None: no spots shown)."""
    sampled = [stack[t] for t in frames_to_sample(len(stack))]
    fit = quality_mixture.estimate_threshold(sampled, voxel, radius)
    if fit.threshold is None:
        return fit, None, None
    frames = [quality_mixture.frame_maxima(v, voxel, radius) for v in sampled]
    args = (frames, fit.noise_excess, fit.n_spots, fit.spot_mean, fit.spot_spread)
    return fit, NEW(*args, floor=False), NEW(*args)


def detection_scores(stack, voxel, radius, truth, stack_threshold=None, threshold=None):
    tables = [detect_spots(stack[t], voxel, radius, threshold, frame=t, stack_threshold=stack_threshold)
              for t in range(len(stack))]
    found = {c: np.concatenate([f[c] for f in tables]) for c in ("frame", "z", "y", "x", "quality")}
    return found, score(found, truth)


def score(found, truth):
    n_match = len(match_points(found, truth, 0.5)[2])
    n_found, n_true = len(found["z"]), len(truth["z"])
    return {"R": round(n_match / n_true, 3), "P": round(n_match / n_found if n_found else 1.0, 3),
            "F1": round(2 * n_match / (n_found + n_true), 3)}


def oracle(found, truth):
    best = None
    for level in np.arange(2.5, 8.01, 0.1):
        keep = found["quality"] >= level
        s = score({k: v[keep] for k, v in found.items()}, truth)
        if best is None or s["F1"] > best[1]["F1"]:
            best = (round(float(level), 2), s)
    return best


def isbi(name, snr, n, n_frames):
    from tracker.scenarios import simulate_scenario
    from tracker.simulate import render_stack

    ndim = 3 if name == "virus" else 2
    field = (10, 256, 256) if ndim == 3 else (256, 256)
    pixel = (0.3, 0.1, 0.1) if ndim == 3 else (0.1, 0.1)
    truth = simulate_scenario(name, n, n_frames, ndim, field_px=field, pixel_um=pixel, seed=1)
    t3 = dict(truth)
    if ndim == 2:
        t3["z"] = np.zeros(len(truth["x"]))
    voxel = (1.0, *pixel) if ndim == 2 else pixel
    shape = (n_frames, 1, *field) if ndim == 2 else (n_frames, *field)
    psf = (1.0, 0.15, 0.15) if ndim == 2 else (0.35, 0.15, 0.15)
    stack = render_stack(t3, shape, voxel, psf, snr=snr, seed=4)
    truth = t3
    radius = estimate_spot_radius([stack[t] for t in frames_to_sample(len(stack))], voxel).radius_um
    fit, old, new = fits(stack, voxel, radius)
    record = {"stack": f"{name} snr{snr:g} n{n}", "frames": n_frames, "radius": [round(r, 3) for r in radius],
              "evidence": round(fit.evidence, 1), "fit": str(fit), "old": old, "new": new}
    found, _ = detection_scores(stack, voxel, radius, truth, threshold=2.5)
    record["oracle"] = oracle(found, truth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for label, rule in (("old", _old), ("new", NEW)):
            quality_mixture.mixture_threshold = rule
            try:
                result = track_stack(stack, voxel_size_um=voxel, device="cpu")
            finally:
                quality_mixture.mixture_threshold = NEW
            m = evaluate(result.tracks, truth)
            record[label + " default"] = {"R": round(m["detection_recall"], 3),
                                          "P": round(m["detection_precision"], 3),
                                          "link F1": round(m["link_f1"], 3),
                                          "stack threshold": None if result.threshold_fit is None
                                          else result.threshold_fit.threshold}
            if label == "new" and new == old:
                break
    print(json.dumps(record), flush=True)


def screen(kind, only):
    import detect_bench as db

    if kind == "grid":
        cells = [(p, s, v, ph, nn, i) for i, ((_, (p, s)), v, ph, nn) in enumerate(
            itertools.product(db.PSFS.items(), db.VOXELS, db.PHOTONS, db.NN_UM))]
        labels = [f"{lab} {v} {ph} {nn}" for (lab, _), v, ph, nn in
                  itertools.product(db.PSFS.items(), db.VOXELS, db.PHOTONS, db.NN_UM)]
    elif kind == "generalization":
        import detect_generalization as dg

        for i, (k, label, psf, size, voxel, levels, photons, nn, seed) in enumerate(dg.cells()):
            if only and i not in only:
                continue
            truth, shape = dg._truth(voxel, nn, seed)
            stack = dg._render(truth, shape, voxel, psf, size, levels, seed)
            _screen_one(i, f"{k} {label} {voxel} {photons} {nn}", stack, voxel, truth)
        return
    else:
        held = list(itertools.product(db.HELD_OUT.items(), db.HELD_OUT_PHOTONS, db.HELD_OUT_NN_UM))
        cells = [(p, s, v, ph, nn, 1000 + i) for i, ((_, (p, s, v)), ph, nn) in enumerate(held)]
        labels = [f"{lab} {v} {ph} {nn}" for (lab, (_, _, v)), ph, nn in held]
    for i, ((psf, size, voxel, photons, nn, seed), label) in enumerate(zip(cells, labels)):
        if only and i not in only:
            continue
        stack, truth = db.make_stack(psf, size, voxel, photons, nn, seed)
        _screen_one(i, label, stack, voxel, truth)


def _screen_one(i, label, stack, voxel, truth):
    radius = estimate_spot_radius((stack[t] for t in frames_to_sample(len(stack))), voxel).radius_um
    fit, old, new = fits(stack, voxel, radius)
    record = {"i": i, "stack": label, "evidence": round(fit.evidence, 1), "old": old, "new": new,
              "mean": round(fit.spot_mean, 2), "spread": round(fit.spot_spread, 2)}
    if old != new:
        record["old default"] = detection_scores(stack, voxel, radius, truth, stack_threshold=old)[1]
        record["new default"] = detection_scores(stack, voxel, radius, truth, stack_threshold=new)[1]
    print(json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("isbi", "screen"))
    parser.add_argument("args", nargs="*")
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--only", default="")
    a = parser.parse_args()
    if a.mode == "isbi":
        isbi(a.args[0], float(a.args[1]), int(a.args[2]), a.frames)
    else:
        screen(a.args[0], {int(i) for i in a.only.split(",") if i})


if __name__ == "__main__":
    main()
