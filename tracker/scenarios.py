"""Scenario families in the manner of the ISBI 2012 Particle Tracking Challenge, and detection levels.

Our own simulator (:mod:`tracker.simulate`) draws one kind of motion, biased
correlated motion, and a linker tuned on it can lean on that. These families
come from a different source: the four scenarios of the ISBI 2012 challenge
(Chenouard et al., *Objective comparison of particle tracking methods*, Nature
Methods 11, 2014), each a biological situation with its own motion:

``vesicle``
    Vesicles diffusing in the cytoplasm: Brownian motion (2D or 3D).
``receptor``
    Membrane receptors that switch between free diffusion and directed runs
    along the cytoskeleton (a two-state Markov chain; 2D).
``switching``
    The same switching with a strong contrast: slow diffusion (0.5 px) and fast runs (6-10 px per frame),
    where a search radius fitted to the diffusion cuts every run's first step off.
``microtubule``
    Growing microtubule tips: fast, directed, nearly straight runs with a
    speed of their own, appearing and vanishing (2D or 3D).
``virus``
    Viruses in 3D: switching between confined diffusion and fast directed
    transport (as ``receptor``, 3D, with an anisotropic voxel).

Parameters are in pixels per frame, as the challenge gives them, and the
tables in µm (``pixel_um`` per axis). Trajectories are birth-death processes:
each particle lives a geometric number of frames and new ones appear
uniformly, keeping the density steady.

:func:`degrade` turns ground truth into what a detector would report at one of
:data:`DETECTION_LEVELS`: Gaussian localisation noise, missed detections and
false positives (uniform clutter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .tables import Table

SCENARIOS = ("vesicle", "receptor", "switching", "microtubule", "virus")


@dataclass(frozen=True)
class DetectionLevel:
    """How far detections stray from the truth.

    Attributes
    ----------
    sigma_px : float
        Localisation noise, standard deviation per axis (pixels of that axis).
    miss_fraction : float
        Probability that a true point is not detected.
    false_per_frame : float
        Mean number of false detections per frame (Poisson), uniform in the field of view.
    """

    sigma_px: float
    miss_fraction: float
    false_per_frame: float


DETECTION_LEVELS = {
    "exact": DetectionLevel(0.0, 0.0, 0.0),
    "noisy": DetectionLevel(0.5, 0.05, 2.0),
    "hard": DetectionLevel(1.0, 0.20, 10.0),
}
"""The three levels of the linking benchmark (issue 23): exact positions; a good detector
(σ 0.5 px, 5 % missed, 2 false per frame); a poor one (σ 1 px, 20 % missed, 10 false per frame)."""


@dataclass(frozen=True)
class ScenarioMotion:
    """Motion of one family, in pixels per frame.

    Attributes
    ----------
    diffusion_px : float
        Per-axis standard deviation of a Brownian step.
    speed_px : (float, float)
        Range of speeds of the directed state (uniform per run).
    turn_sigma_rad : float
        Per-frame change of a directed particle's direction (its heading drifts).
    switch_probability : float
        Per-frame probability of switching between the diffusive and directed states (0: never).
    directed_fraction : float
        Fraction of particles that start in the directed state.
    mean_lifetime : float
        Mean number of frames a particle lives (geometric).
    """

    diffusion_px: float
    speed_px: tuple[float, float]
    turn_sigma_rad: float
    switch_probability: float
    directed_fraction: float
    mean_lifetime: float


MOTIONS = {
    "vesicle": ScenarioMotion(1.5, (0.0, 0.0), 0.0, 0.0, 0.0, 40.0),
    "receptor": ScenarioMotion(1.0, (2.0, 4.0), 0.15, 0.1, 0.3, 40.0),
    "switching": ScenarioMotion(0.5, (6.0, 10.0), 0.1, 0.1, 0.3, 40.0),
    "microtubule": ScenarioMotion(0.4, (4.0, 7.0), 0.1, 0.0, 1.0, 20.0),
    "virus": ScenarioMotion(1.0, (3.0, 6.0), 0.15, 0.1, 0.3, 40.0),
}
"""Per-family motion, chosen to resemble the challenge's mid-density scenarios (steps of a
few pixels at mean nearest-neighbour distances of 10-20 pixels), not fitted to any linker."""


def simulate_scenario(
    name: str,
    n_particles: int = 200,
    n_frames: int = 50,
    ndim: int | None = None,
    *,
    field_px: Sequence[int] | None = None,
    pixel_um: Sequence[float] | None = None,
    seed: int = 0,
) -> Table:
    """Ground truth of one scenario family.

    Parameters
    ----------
    name : {"vesicle", "receptor", "microtubule", "virus"}
    n_particles : int
        Particles alive at any time (on average).
    n_frames : int
    ndim : {2, 3}, optional
        Dimension (default: 3 for ``virus``, else 2).
    field_px : sequence of int, optional
        Field of view in pixels, ``(y, x)`` or ``(z, y, x)``; default 512 × 512 (× 16 in z).
    pixel_um : sequence of float, optional
        Pixel size in µm per axis; default 0.1 µm in y, x and 0.3 µm in z.
    seed : int

    Returns
    -------
    Table
        ``track_id, frame, (z,) y, x`` (µm), sorted by ``track_id, frame``; every row ``visible``.
    """
    if name not in MOTIONS:
        raise ValueError(f"unknown scenario {name!r}; expected one of {SCENARIOS}")
    ndim = ndim if ndim is not None else (3 if name == "virus" else 2)
    if ndim not in (2, 3):
        raise ValueError(f"ndim must be 2 or 3, got {ndim}")
    field, pixel = _field_and_pixel(ndim, field_px, pixel_um)
    motion = MOTIONS[name]
    rng = np.random.default_rng(seed)
    # In 3D the z step is in z pixels, which are larger: scale it so that the motion is isotropic in µm.
    axis_scale = pixel[-1] / pixel

    def born(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        position = rng.random((k, ndim)) * field
        directed = rng.random(k) < motion.directed_fraction
        heading = _random_unit(rng, k, ndim)
        speed = rng.uniform(*motion.speed_px, size=k)
        return position, directed, heading, speed

    position, directed, heading, speed = born(n_particles)
    ids = np.arange(n_particles)
    next_id = n_particles
    death = 1.0 / motion.mean_lifetime
    rows_frame, rows_id, rows_position = [], [], []
    for frame in range(n_frames):
        if frame:
            # Directed particles move along a drifting heading; diffusive ones take Brownian steps.
            heading = _turn(rng, heading, motion.turn_sigma_rad)
            step = rng.normal(0.0, motion.diffusion_px, position.shape)
            step[directed] += speed[directed, None] * heading[directed]
            position = position + step * axis_scale
            switch = rng.random(len(ids)) < motion.switch_probability
            directed = directed ^ switch
            new_run = switch & directed
            speed[new_run] = rng.uniform(*motion.speed_px, size=int(new_run.sum()))
            heading[new_run] = _random_unit(rng, int(new_run.sum()), ndim)
            alive = (rng.random(len(ids)) >= death) & np.all((position >= 0) & (position <= field), axis=1)
            n_new = n_particles - int(alive.sum())
            position, directed, heading, speed, ids = (a[alive] for a in (position, directed, heading, speed, ids))
            if n_new > 0:
                new = born(n_new)
                position, directed, heading, speed = (np.concatenate([a, b]) for a, b in
                                                      zip((position, directed, heading, speed), new))
                ids = np.concatenate([ids, np.arange(next_id, next_id + n_new)])
                next_id += n_new
        rows_frame.append(np.full(len(ids), frame))
        rows_id.append(ids)
        rows_position.append(position * pixel)
    frames = np.concatenate(rows_frame).astype(np.int64)
    track_id = np.concatenate(rows_id).astype(np.int64)
    positions = np.concatenate(rows_position)
    order = np.lexsort((frames, track_id))
    axes = ("z", "y", "x")[3 - ndim:]
    table = {"track_id": track_id[order], "frame": frames[order]}
    table.update({axis: positions[order, i] for i, axis in enumerate(axes)})
    table["visible"] = np.ones(len(order), dtype=bool)
    return table


def degrade(
    truth: Table,
    level: str | DetectionLevel,
    *,
    field_px: Sequence[int] | None = None,
    pixel_um: Sequence[float] | None = None,
    seed: int = 0,
) -> Table:
    """What a detector reports of ``truth`` at a detection level.

    Parameters
    ----------
    truth : Table
        From :func:`simulate_scenario` (or any ``frame, (z,) y, x`` table in µm).
    level : str or DetectionLevel
        A key of :data:`DETECTION_LEVELS` or a level of your own.
    field_px, pixel_um
        The field of view (pixels) and pixel size (µm) per axis, as given to
        :func:`simulate_scenario` (same defaults): where false positives fall,
        and the unit of the noise.
    seed : int

    Returns
    -------
    Table
        ``frame, (z,) y, x`` (µm), sorted by frame (rows of a frame in random
        order, so that no linker can lean on the truth's order).
    """
    if isinstance(level, str):
        if level not in DETECTION_LEVELS:
            raise ValueError(f"unknown detection level {level!r}; expected one of {tuple(DETECTION_LEVELS)}")
        level = DETECTION_LEVELS[level]
    axes = [a for a in ("z", "y", "x") if a in truth]
    ndim = len(axes)
    field, pixel = _field_and_pixel(ndim, field_px, pixel_um)
    rng = np.random.default_rng(seed)
    frames = np.asarray(truth["frame"], dtype=np.int64)
    positions = np.column_stack([np.asarray(truth[a], dtype=np.float64) for a in axes]).reshape(-1, ndim)
    kept = rng.random(len(frames)) >= level.miss_fraction
    frames, positions = frames[kept], positions[kept]
    positions = positions + rng.normal(0.0, 1.0, positions.shape) * (level.sigma_px * pixel)
    if level.false_per_frame > 0 and len(truth["frame"]):
        all_frames = np.arange(int(np.min(truth["frame"])), int(np.max(truth["frame"])) + 1)
        counts = rng.poisson(level.false_per_frame, len(all_frames))
        false_frames = np.repeat(all_frames, counts)
        false_positions = rng.random((len(false_frames), ndim)) * field * pixel
        frames = np.concatenate([frames, false_frames])
        positions = np.concatenate([positions, false_positions])
    order = np.lexsort((rng.random(len(frames)), frames))
    table = {"frame": frames[order]}
    table.update({axis: positions[order, i] for i, axis in enumerate(axes)})
    return table


def _field_and_pixel(ndim: int, field_px, pixel_um) -> tuple[np.ndarray, np.ndarray]:
    """The field of view (pixels) and pixel size (µm) per axis, or their defaults (512 × 512 (× 16), 0.1 µm (z 0.3))."""
    field = np.asarray(field_px if field_px is not None else ((16, 512, 512) if ndim == 3 else (512, 512)), float)
    pixel = np.asarray(pixel_um if pixel_um is not None else ((0.3, 0.1, 0.1) if ndim == 3 else (0.1, 0.1)), float)
    if field.shape != (ndim,) or pixel.shape != (ndim,):
        raise ValueError(f"field_px and pixel_um need {ndim} values")
    return field, pixel


def _random_unit(rng: np.random.Generator, k: int, ndim: int) -> np.ndarray:
    vectors = rng.normal(size=(k, ndim))
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _turn(rng: np.random.Generator, heading: np.ndarray, sigma: float) -> np.ndarray:
    """Headings rotated by a small random angle (std ``sigma`` rad): a perturbation renormalised."""
    if sigma <= 0 or len(heading) == 0:
        return heading
    turned = heading + rng.normal(0.0, sigma, heading.shape)
    return turned / np.maximum(np.linalg.norm(turned, axis=1, keepdims=True), 1e-12)
