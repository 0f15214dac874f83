"""Detection quality on stacks of other microscopes: ours at defaults against peers at their best.

``grid`` (the default): rendered stacks of three PSFs (Gaussian σ z, y, x =
0.35, 0.15, 0.15 and 0.6, 0.2, 0.2 µm; a confocal-like jinc⁴ × sinc⁴ PSF),
two voxel sizes, 150–1500 photons per spot, mean nearest-neighbour distances
1.5 and 3 µm, rendered by :func:`tracker.simulate.render_camera_stack`
(photons integrated over each voxel, Poisson, read noise, gain, offset: not
the detector's model). Each is detected by

* ours at defaults (spot radius estimated from the stack, default threshold),
* ours given the true radius (√3 × the PSF's σ, or its best-fitting
  Gaussian's), at the default threshold and at the oracle-best threshold,
* scikit-image ``blob_log`` (σ = the true σ), trackpy ``locate`` (diameter
  from the true σ) and a TrackMate-style LoG detector (LoG at the true σ,
  3×3×3 maxima, quadratic sub-voxel fit), each at its oracle-best threshold
  (the one that maximises F1 against the ground truth).

Detections are matched to the truth one-to-one within 0.5 µm
(:func:`tracker.metrics.match_points`); recall, precision, F1, RMSE (µm) and
the time per frame are reported. ``--speed``: the GPU/CPU timing of
:func:`tracker.detect.detect_spots` on one large frame (the old benchmark).

Usage::

    python benchmarks/detect_bench.py --out benchmarks/results/detect_bench.md
    python benchmarks/detect_bench.py --speed --shape 64,512,512 --cpu
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import time
import warnings

import numpy as np

from tracker.backend import cupy_or_none
from tracker.detect import detect_spots
from tracker.metrics import match_points
from tracker.quality_mixture import estimate_threshold
from tracker.simulate import gaussian_equivalent_sigma, render_camera_stack, render_stack, simulate_tracks
from tracker.spot_scale import estimate_spot_radius, frames_to_sample

MATCH_UM = 0.5
FIELD_UM = (6.0, 16.0, 16.0)
TARGET_TRUE_SPOTS = 150  # frames per stack: enough for about this many true spots
PSFS = {"gauss 0.35/0.15": ("gaussian", (0.35, 0.15, 0.15)),
        "gauss 0.6/0.2": ("gaussian", (0.6, 0.2, 0.2)),
        "confocal": ("confocal", (0.6, 0.16, 0.16))}
VOXELS = ((0.5, 0.2, 0.2), (0.3, 0.1, 0.1))
PHOTONS = (150, 400, 1500)
NN_UM = (1.5, 3.0)
ORACLE_THRESHOLDS = (3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0, 8.0, 10.0)
BACKGROUND_PER_UM3 = 1000.0  # background photons per µm³ (so per voxel it scales with the voxel)


def make_stack(psf: str, size, voxel, photons: float, nn_um: float, seed: int):
    """A rendered stack and its truth: uniform random spots of mean nearest-neighbour distance ``nn_um``."""
    density = (0.554 / nn_um) ** 3  # mean NN distance of a 3D Poisson process: 0.554 ρ^(-1/3)
    per_frame = density * np.prod(FIELD_UM)
    n_frames = max(2, math.ceil(TARGET_TRUE_SPOTS / per_frame))
    shape = tuple(int(round(f / v)) + 1 for f, v in zip(FIELD_UM, voxel))
    truth = simulate_tracks(int(round(per_frame)), n_frames, FIELD_UM, 0.5, 0.0, margin_um=0.0, seed=seed)
    stack = render_camera_stack(truth, (n_frames, *shape), voxel, psf, size, photons=photons,
                                background_photons=BACKGROUND_PER_UM3 * float(np.prod(voxel)), seed=seed)
    return stack, truth


def scores(found: dict, truth: dict) -> dict:
    """Recall, precision, F1 and RMSE (µm) of detections against the truth (matched within 0.5 µm)."""
    _, _, distance = match_points(found, truth, MATCH_UM)
    n_found, n_true, n_match = len(found["z"]), len(truth["z"]), len(distance)
    recall = n_match / n_true if n_true else float("nan")
    precision = n_match / n_found if n_found else 1.0
    f1 = 2 * n_match / (n_found + n_true) if n_found + n_true else 1.0
    rmse = float(np.sqrt(np.mean(distance**2))) if n_match else float("nan")
    return {"recall": recall, "precision": precision, "f1": f1, "rmse": rmse}


def oracle(found: dict, score: np.ndarray, truth: dict) -> tuple[dict, float]:
    """The best F1 over thresholds on ``score`` (detections kept where score ≥ threshold).

    Thresholds tried: every score that keeps between half and 1.6 times as
    many detections as there are true spots (60 of them), and 20 quantiles.
    """
    if len(score) == 0:
        return scores(found, truth), float("nan")
    ordered = np.sort(score)[::-1]
    ranks = np.unique(np.clip(np.round(len(truth["z"]) * np.linspace(0.5, 1.6, 60)), 1, len(ordered)).astype(int))
    levels = np.unique(np.concatenate([ordered[ranks - 1], np.quantile(score, np.linspace(0, 1, 20))]))
    best, best_level = None, float("nan")
    for level in levels:
        keep = score >= level
        result = scores({k: np.asarray(v)[keep] for k, v in found.items()}, truth)
        if best is None or result["f1"] > best["f1"]:
            best, best_level = result, float(level)
    return best, best_level


def table_of(rows: list[tuple[int, np.ndarray, np.ndarray]], voxel) -> dict:
    """Detections ``(frame, voxel coords (n, 3), score)`` per frame → table with µm columns and ``score``."""
    frames = np.concatenate([np.full(len(c), t) for t, c, _ in rows]) if rows else np.empty(0, int)
    coords = np.concatenate([c for _, c, _ in rows]).reshape(-1, 3) if rows else np.empty((0, 3))
    score = np.concatenate([s for _, _, s in rows]) if rows else np.empty(0)
    um = coords * np.asarray(voxel)
    return {"frame": frames, "z": um[:, 0], "y": um[:, 1], "x": um[:, 2], "score": score}


def run_ours(stack, voxel, radius, threshold=None) -> tuple[dict, float]:
    """Ours on every frame; ``threshold=None``: as ``track run`` (each frame's automatic threshold, at most the
    stack's from its sampled frames, :func:`tracker.quality_mixture.estimate_threshold`; its time included)."""
    tables, start = [], time.perf_counter()
    stack_threshold = None
    if threshold is None:
        stack_threshold = estimate_threshold([stack[t] for t in frames_to_sample(len(stack))], voxel, radius).threshold
    for t in range(len(stack)):
        table = detect_spots(stack[t], voxel, radius, threshold, frame=t, stack_threshold=stack_threshold)
        tables.append((t, np.column_stack([table["z_vox"], table["y_vox"], table["x_vox"]]), table["quality"]))
    return table_of(tables, voxel), (time.perf_counter() - start) / len(stack)


def run_blob_log(stack, voxel, sigma_vox, truth) -> tuple[dict, float]:
    """``skimage.feature.blob_log`` at one σ (the truth), re-run for each threshold (pruning depends on it)."""
    from skimage.feature import blob_log

    images = [frame.astype(np.float32) / 65535.0 for frame in stack]  # what blob_log's img_as_float gives

    def detect(threshold):
        rows = []
        for t, image in enumerate(images):
            blobs = blob_log(image, min_sigma=tuple(sigma_vox), max_sigma=tuple(sigma_vox), num_sigma=1,
                             threshold=threshold, exclude_border=False)
            rows.append((t, blobs[:, :3].astype(np.float64), np.zeros(len(blobs))))
        return table_of(rows, voxel)

    # The scale-normalised LoG response at the truth sets the range of thresholds worth trying.
    from scipy.ndimage import gaussian_laplace

    response = -gaussian_laplace(images[0], sigma_vox) * float(np.mean(sigma_vox)) ** 2
    peak = float(np.quantile(response, 0.9999))
    levels = peak * np.geomspace(0.01, 1.0, 14)
    results = [(scores(detect(level), truth), level) for level in levels]
    best, level = max(results, key=lambda r: r[0]["f1"])
    for refined in level * np.geomspace(0.8, 1.25, 5):  # finer around the best
        result = scores(detect(refined), truth)
        if result["f1"] > best["f1"]:
            best, level = result, refined
    start = time.perf_counter()
    detect(level)
    return best, (time.perf_counter() - start) / len(stack)


def run_trackpy(stack, voxel, sigma_vox, truth) -> tuple[dict, float]:
    """``trackpy.locate`` in 3D, diameter 2⌈2σ⌉ + 1 and separation ⌈√3 σ⌉ (one spot radius, as ours) per axis.

    The threshold (``minmass``) is the oracle's; trackpy's default separation
    (diameter + 1) merges spots of the dense stacks.
    """
    import trackpy

    trackpy.quiet()
    diameter = tuple(int(2 * math.ceil(2 * s) + 1) for s in sigma_vox)
    separation = tuple(max(1, int(math.ceil(math.sqrt(3) * s))) for s in sigma_vox)
    rows, start = [], time.perf_counter()
    for t, frame in enumerate(stack):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = trackpy.locate(frame, diameter, minmass=0, separation=separation, characterize=False)
        rows.append((t, found[["z", "y", "x"]].to_numpy(np.float64), found["mass"].to_numpy(np.float64)))
    elapsed = (time.perf_counter() - start) / len(stack)
    table = table_of(rows, voxel)
    best, _ = oracle({k: v for k, v in table.items() if k != "score"}, table["score"], truth)
    return best, elapsed


def trackmate_log(volume, sigma_vox) -> tuple[np.ndarray, np.ndarray]:
    """TrackMate's LoG detector: −σ²∇²G response, maxima over 3×3×3, quadratic sub-voxel fit per axis."""
    from scipy.ndimage import gaussian_laplace, maximum_filter

    response = -gaussian_laplace(volume.astype(np.float32), sigma_vox) * float(np.mean(sigma_vox)) ** 2
    peaks = (response == maximum_filter(response, size=3, mode="nearest")) & (response > 0)
    coords = np.argwhere(peaks)
    sub = coords.astype(np.float64)
    for axis in range(3):
        below, above = coords.copy(), coords.copy()
        below[:, axis] = np.maximum(coords[:, axis] - 1, 0)
        above[:, axis] = np.minimum(coords[:, axis] + 1, volume.shape[axis] - 1)
        f0, fm, fp = (response[tuple(c.T)].astype(np.float64) for c in (coords, below, above))
        curvature = fm - 2 * f0 + fp
        with np.errstate(divide="ignore", invalid="ignore"):
            delta = np.where(curvature < 0, 0.5 * (fm - fp) / curvature, 0.0)
        sub[:, axis] += np.clip(np.nan_to_num(delta), -0.5, 0.5)
    return sub, response[tuple(coords.T)].astype(np.float64)


def run_trackmate(stack, voxel, sigma_vox, truth) -> tuple[dict, float]:
    rows, start = [], time.perf_counter()
    for t, frame in enumerate(stack):
        sub, quality = trackmate_log(frame, sigma_vox)
        rows.append((t, sub, quality))
    elapsed = (time.perf_counter() - start) / len(stack)
    table = table_of(rows, voxel)
    best, _ = oracle({k: v for k, v in table.items() if k != "score"}, table["score"], truth)
    return best, elapsed


def evaluate_stack(label, psf, size, voxel, photons, nn_um, seed, kept: dict | None = None,
                   ours_only: bool = False) -> dict:
    """One stack's record. ``kept``: an earlier record of the same stack whose fixed-threshold columns (the
    peers', ours at the oracle threshold) are kept instead of re-run (they do not depend on the automatic
    threshold); ``ours_only``: those columns left out (stacks of the held-out families)."""
    stack, truth = make_stack(psf, size, voxel, photons, nn_um, seed)
    true_sigma = np.asarray(size) if psf == "gaussian" else gaussian_equivalent_sigma(size)
    true_radius = tuple(float(r) for r in np.sqrt(3.0) * true_sigma)
    sigma_vox = true_sigma / np.asarray(voxel)
    record = {"psf": label, "voxel": voxel, "photons": photons, "nn_um": nn_um, "frames": len(stack),
              "true_spots": len(truth["z"]), "true_radius": true_radius}

    start = time.perf_counter()
    scale = estimate_spot_radius((stack[t] for t in frames_to_sample(len(stack))), voxel)
    estimate_time = time.perf_counter() - start
    record["estimated_radius"] = scale.radius_um
    record["estimate_spots"] = scale.n_spots
    found, elapsed = run_ours(stack, voxel, scale.radius_um)
    record["ours default"] = {**scores(found, truth), "time": elapsed + estimate_time / len(stack)}
    found, elapsed = run_ours(stack, voxel, true_radius)
    record["ours true radius"] = {**scores(found, truth), "time": elapsed}
    # Re-run per threshold: which close spots are split depends on it, so filtering one run is not the same.
    if ours_only:
        return record
    if kept is not None:
        return {**record, **{name: kept[name] for name in ("ours true radius, oracle", *PEERS)}}
    runs = [(scores(run_ours(stack, voxel, true_radius, threshold=level)[0], truth), level)
            for level in ORACLE_THRESHOLDS]
    best, level = max(runs, key=lambda run: run[0]["f1"])
    record["ours true radius, oracle"] = {**best, "time": elapsed, "threshold": level}
    for name, runner in (("blob_log", run_blob_log), ("trackpy", run_trackpy), ("TrackMate LoG", run_trackmate)):
        best, elapsed = runner(stack, voxel, sigma_vox, truth)
        record[name] = {**best, "time": elapsed}
    return record


HELD_OUT = {"gauss 0.45/0.18": ("gaussian", (0.45, 0.18, 0.18), (0.4, 0.15, 0.15)),
            "gauss 0.8/0.25": ("gaussian", (0.8, 0.25, 0.25), (0.25, 0.1, 0.1)),
            "confocal 0.8/0.2": ("confocal", (0.8, 0.2, 0.2), (0.4, 0.12, 0.12))}
"""``--held-out``: families no choice of the detector's was made on (PSF, size µm, voxel µm), each at
:data:`HELD_OUT_PHOTONS` and :data:`HELD_OUT_NN_UM`, seeds 1000 and up."""
HELD_OUT_PHOTONS = (200, 300, 800)
HELD_OUT_NN_UM = (2.0, 3.0)


def held_out_markdown(records: list[dict]) -> str:
    """The held-out families' table: ours at defaults and given the true radius (no peers)."""
    lines = ["| PSF (µm) | voxel (µm) | photons | NN (µm) | radius est./true | ours default: R / P / F1 | "
             "ours true radius: R / P / F1 |", "|---|---|---:|---:|---|---|---|"]
    for r in records:
        ratio = ", ".join(f"{e / t:.2f}" for e, t in zip(r["estimated_radius"], r["true_radius"]))
        cells = [f"{r[m]['recall']:.2f} / {r[m]['precision']:.2f} / {r[m]['f1']:.3f}"
                 for m in ("ours default", "ours true radius")]
        lines.append(f"| {r['psf']} | {', '.join(f'{v:g}' for v in r['voxel'])} | {r['photons']} | "
                     f"{r['nn_um']:g} | {ratio} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PEERS = ("blob_log", "trackpy", "TrackMate LoG")
METHODS = ("ours default", "ours true radius", "ours true radius, oracle") + PEERS


def markdown(records: list[dict]) -> str:
    lines = [
        "# Detection without tuning: ours at defaults against peers at their oracle-best thresholds",
        "",
        f"`python benchmarks/detect_bench.py` on this 2-core CPU machine ({platform.processor() or platform.machine()}, "
        "shared with other jobs: times are indicative). Field of view "
        f"{' × '.join(f'{f:g}' for f in FIELD_UM)} µm (z, y, x), spots uniformly at random (the faces included), "
        f"enough frames for ~{TARGET_TRUE_SPOTS} true spots; rendered by `tracker.simulate.render_camera_stack` "
        f"(photons integrated over each voxel, background {BACKGROUND_PER_UM3:g} photons/µm³, Poisson, read noise "
        "1.5 e⁻, gain 2, offset 100). Matched one-to-one within 0.5 µm. PSFs: Gaussian σ (z, y, x) in µm, or "
        "confocal-like jinc⁴ × sinc⁴ of widths (0.6, 0.16, 0.16) µm (best-fitting Gaussian σ "
        f"{', '.join(f'{s:.3f}' for s in gaussian_equivalent_sigma(PSFS['confocal'][1]))} µm). "
        "Peers are given the true σ and the threshold that maximises their F1 on the truth; ours at defaults is given "
        "nothing. Radius: estimated / true (√3 σ). Targets: ours at defaults reaches F1 ≥ the best peer's − 0.01, "
        "and ≥ 0.95 where a peer reaches 0.97; RMSE ≤ that of the peer with the best F1.",
        "",
        "## F1 (and the targets)",
        "",
        "| PSF | voxel (µm) | photons | NN (µm) | spots | radius est./true (z, y, x) | ours default | ours true r | "
        "ours true r, oracle | blob_log | trackpy | TrackMate LoG | target met |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in records:
        best_peer = max(r[p]["f1"] for p in PEERS)
        ours = r["ours default"]["f1"]
        need = max(best_peer - 0.01, 0.95 if best_peer >= 0.97 else 0.0)
        best_name = max(PEERS, key=lambda p: r[p]["f1"])
        rmse_ok = r["ours default"]["rmse"] <= r[best_name]["rmse"]
        ratio = ", ".join(f"{e / t:.2f}" for e, t in zip(r["estimated_radius"], r["true_radius"]))
        verdict = ("F1 yes" if ours >= need else f"F1 NO (needs {need:.2f})") + (", RMSE yes" if rmse_ok else ", RMSE NO")
        lines.append(
            f"| {r['psf']} | {', '.join(f'{v:g}' for v in r['voxel'])} | {r['photons']} | {r['nn_um']:g} | "
            f"{r['true_spots']} | {ratio} | " + " | ".join(f"{r[m]['f1']:.3f}" for m in METHODS) + f" | {verdict} |")
    lines += ["", "## Recall / precision / RMSE (nm) / ms per frame", "",
              "| PSF | voxel (µm) | photons | NN (µm) | " + " | ".join(METHODS) + " |",
              "|---|---|---:|---:|" + "---|" * len(METHODS)]
    for r in records:
        cells = [f"{r[m]['recall']:.2f} / {r[m]['precision']:.2f} / {1000 * r[m]['rmse']:.0f} / "
                 f"{1000 * r[m]['time']:.0f}" for m in METHODS]
        lines.append(f"| {r['psf']} | {', '.join(f'{v:g}' for v in r['voxel'])} | {r['photons']} | "
                     f"{r['nn_um']:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def speed(args) -> None:
    """The GPU (and with ``--cpu`` CPU) time of :func:`detect_spots` on one rendered frame."""
    shape = tuple(int(v) for v in args.shape.split(","))
    voxel = tuple(float(v) for v in args.voxel.split(","))
    psf = tuple(float(v) for v in args.psf.split(","))
    spot_radius = tuple(3**0.5 * s for s in psf)
    field = tuple((n - 1) * v for n, v in zip(shape, voxel))
    truth = simulate_tracks(args.particles, 1, field, 0.1, 0.0, seed=0)
    cupy = cupy_or_none()
    backends = ([("GPU", cupy)] if cupy is not None else []) + ([("CPU", np)] if args.cpu or cupy is None else [])
    print("| device | volume | spots | detections | detect (s) |\n|---|---|---:|---:|---:|")
    for label, xp in backends:
        volume = render_stack(truth, (1, *shape), voxel, psf, snr=6, seed=0, xp=xp)[0]
        detect_spots(volume[:32, :256, :256], voxel, spot_radius)  # warm-up (GPU: kernel compilation)
        times = []
        for _ in range(args.repeats):
            if xp is not np:
                xp.cuda.Device().synchronize()
            start = time.perf_counter()
            table = detect_spots(volume, voxel, spot_radius)
            if xp is not np:
                xp.cuda.Device().synchronize()
            times.append(time.perf_counter() - start)
        print(f"| {label} | {'×'.join(map(str, shape))} | {len(truth['z']):,} | {len(table['z']):,} | "
              f"{np.median(times):.3f} |", flush=True)
        del volume


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the markdown tables here (grid)")
    parser.add_argument("--jsonl", help="append one JSON record per stack here (grid)")
    parser.add_argument("--only", help="grid cells whose label contains this text (e.g. 'confocal')")
    parser.add_argument("--keep-peers", help="a JSONL of earlier records: their peers' and oracle columns are kept, "
                        "only ours at the automatic threshold re-run")
    parser.add_argument("--held-out", action="store_true", help="the held-out families instead of the grid "
                        "(ours only)")
    parser.add_argument("--speed", action="store_true", help="time detect_spots on one large frame instead")
    parser.add_argument("--shape", default="64,512,512", help="--speed: z,y,x voxels")
    parser.add_argument("--particles", type=int, default=5000, help="--speed: spots")
    parser.add_argument("--voxel", default="0.4,0.15,0.15", help="--speed: z,y,x µm")
    parser.add_argument("--psf", default="0.45,0.18,0.18", help="--speed: PSF sigma z,y,x µm")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpu", action="store_true", help="--speed: also time the CPU (NumPy/SciPy) path")
    args = parser.parse_args()
    if args.speed:
        speed(args)
        return
    records = []
    kept = {}
    if args.keep_peers:
        with open(args.keep_peers, encoding="utf-8") as handle:
            for line in handle:  # (the last record of a stack wins)
                r = json.loads(line)
                kept[(r["psf"], tuple(r["voxel"]), r["photons"], float(r["nn_um"]))] = r
    if args.held_out:
        held = itertools.product(HELD_OUT.items(), HELD_OUT_PHOTONS, HELD_OUT_NN_UM)
        cells = [(1000 + i, (label, (psf, size)), voxel, photons, nn_um)
                 for i, ((label, (psf, size, voxel)), photons, nn_um) in enumerate(held)]
    else:
        cells = [(seed, *cell) for seed, cell in enumerate(itertools.product(PSFS.items(), VOXELS, PHOTONS, NN_UM))]
    for seed, (label, (psf, size)), voxel, photons, nn_um in cells:
        name = f"{label} {voxel} {photons} {nn_um}"
        if args.only and args.only not in name:
            continue
        record = evaluate_stack(label, psf, size, voxel, photons, nn_um, seed,
                                kept=kept.get((label, tuple(voxel), photons, float(nn_um))), ours_only=args.held_out)
        records.append(record)
        print(json.dumps(record), flush=True)
        if args.jsonl:
            with open(args.jsonl, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
    text = held_out_markdown(records) if args.held_out else markdown(records)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text)
    print(text)


if __name__ == "__main__":
    main()
