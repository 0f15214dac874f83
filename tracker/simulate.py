"""Ground truth for validation: particles in biased correlated motion, rendered to stacks.

Motion follows Vasconcelos & Rosenhahn (2009): each step mixes a *correlation*
vector (the previous velocity, a tendency to keep going) with a random *bias*
vector, weighted by a persistence level ``p`` in [0, 1]. We use the
stationary form of that mixture,

    v[t] = p * v[t-1] + sqrt(1 - p**2) * b[t],   b[t] ~ N(0, (step**2 / 3) I),

so the root-mean-square step stays ``step`` for every ``p`` and the expected
next velocity is ``p`` times the last one (``p = 0``: Brownian; ``p = 1``:
straight lines).

All positions are in micrometres, ordered ``z, y, x``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .params import SIMULATION_DEFAULTS as _S
from .params import SimulationParams
from .stack import check_voxel_size
from .tables import Table
from .validation import check_memory

RENDER_CHUNK_ELEMENTS = 1 << 24
"""Particles x PSF-window voxels splatted at once by :func:`render_stack` (bounds its memory)."""

TRUTH_BYTES_PER_ROW = 500
"""Peak memory (bytes) of :func:`simulate_tracks` per row of ground truth (particle and frame): 190-450
measured with ``tracemalloc`` at 40-3,000 particles and 2 frames."""

RENDER_BYTES_PER_VOXEL = 48
"""Peak memory (bytes) of :func:`render_stack` on the CPU per voxel of a frame, beyond the uint16 stack itself:
34-47 measured with ``tracemalloc`` on (16, 96, 96) and (8, 256, 256) frames."""

RENDER_BYTES_PER_SPLAT = 140
"""Peak memory (bytes) of :func:`render_stack` per particle × PSF-window voxel splatted at once (at most
:data:`RENDER_CHUNK_ELEMENTS`): 131 measured with ``tracemalloc`` at 3,000 particles and a 729-voxel window."""


def simulate_tracks(
    n_particles: int = _S.n_particles,
    n_frames: int = _S.n_frames,
    field_of_view_um: Sequence[float] = (8.0, 20.0, 20.0),
    step_um: float | Sequence[float] = _S.step_um,
    persistence: float = _S.persistence,
    margin_um: float | None = None,
    birth_rate: float = _S.birth_rate,
    death_rate: float = _S.death_rate,
    blink_probability: float = _S.blink_probability,
    seed: int = _S.seed,
) -> Table:
    """Simulate trajectories of particles in biased correlated motion.

    Particles live in the field of view enlarged by ``margin_um`` on every
    side (reflecting walls), so they leave and enter the field of view.

    Parameters
    ----------
    n_particles : int
        Particles alive at the start (and on average, with births = deaths).
    n_frames : int
        Number of time points.
    field_of_view_um : (3,) floats
        Extent of the imaged volume, ``z, y, x`` in µm, from the origin.
    step_um : float or sequence of floats
        Root-mean-square displacement per frame (µm). Several values: as many
        mobility classes, particle ``i`` (and the ``i``-th one born) moving
        with ``step_um[i % len(step_um)]``.
    persistence : float
        Persistence level ``p`` in [0, 1].
    margin_um : float, optional
        Width of the invisible shell around the field of view (µm); defaults
        to twice the largest ``step_um``. Zero keeps every particle in view.
    birth_rate, death_rate : float
        Expected births per frame as a fraction of ``n_particles``; per-frame
        probability that a particle dies.
    blink_probability : float
        Probability that a particle is not detectable in a frame (it keeps
        moving): the ``visible`` column is False there.
    seed : int
        Seed of the random generator; same seed, same tracks.

    Returns
    -------
    Table
        Ground truth with ``track_id, frame, z, y, x`` (µm) and ``visible``,
        one row per particle and frame *inside the field of view*. A particle
        that leaves the field of view and comes back gets a new ``track_id``.
        Sorted by ``track_id, frame``.
    """
    # One-line ValueErrors naming the option and its range (tracker.params.SimulationParams).
    SimulationParams(n_frames=n_frames, n_particles=n_particles, persistence=persistence, birth_rate=birth_rate,
                     death_rate=death_rate, blink_probability=blink_probability, seed=seed)
    try:
        steps = np.atleast_1d(np.asarray(step_um, dtype=np.float64))
    except (TypeError, ValueError):
        steps = np.empty(0)
    if steps.ndim != 1 or len(steps) == 0 or not np.all(np.isfinite(steps) & (steps >= 0)):
        raise ValueError(f"step_um must be one or more non-negative numbers of µm, got {step_um!r}")
    if not (len(np.ravel(field_of_view_um)) == 3 and np.all(np.isfinite(field_of_view_um))
            and np.all(np.asarray(field_of_view_um) >= 0)):
        raise ValueError(f"field_of_view_um must be three non-negative numbers z,y,x in µm, got {field_of_view_um!r}")
    if margin_um is not None and not (np.isfinite(margin_um) and margin_um >= 0):
        raise ValueError(f"margin_um must be a non-negative number of µm, got {margin_um!r}")
    expected_rows = float(n_particles) * n_frames * (1.0 + birth_rate * n_frames)
    check_memory(expected_rows * TRUTH_BYTES_PER_ROW, f"simulating {n_particles} particles over {n_frames} frames",
                 "give fewer particles or frames")
    rng = np.random.default_rng(seed)
    fov = np.asarray(field_of_view_um, dtype=np.float64)
    margin = 2.0 * float(steps.max()) if margin_um is None else float(margin_um)
    low, high = -margin * np.ones(3), fov + margin

    def axis_scale(ids: np.ndarray) -> float | np.ndarray:
        """Per-axis RMS step (µm) of particles ``ids``: a number for one class, else a (k, 1) column."""
        return steps[0] / np.sqrt(3.0) if len(steps) == 1 else (steps[ids % len(steps)] / np.sqrt(3.0))[:, None]

    def new_particles(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        position = low + rng.random((len(ids), 3)) * (high - low)
        velocity = rng.normal(0.0, axis_scale(ids), (len(ids), 3))
        return position, velocity

    particle_id = np.arange(n_particles)
    position, velocity = new_particles(particle_id)
    next_id = n_particles
    records = []
    for frame in range(n_frames):
        if frame > 0:
            bias_scale = np.sqrt(1.0 - persistence**2) * axis_scale(particle_id)
            velocity = persistence * velocity + rng.normal(0.0, bias_scale, velocity.shape)
            position = position + velocity
            # Reflecting walls keep the density constant.
            for _ in range(2):
                below, above = position < low, position > high
                position = np.where(below, 2 * low - position, position)
                position = np.where(above, 2 * high - position, position)
                velocity = np.where(below | above, -velocity, velocity)
            position = np.clip(position, low, high)
            alive = rng.random(len(position)) >= death_rate
            position, velocity, particle_id = position[alive], velocity[alive], particle_id[alive]
            n_born = rng.poisson(birth_rate * n_particles) if birth_rate > 0 else 0
            if n_born:
                born = np.arange(next_id, next_id + n_born)
                born_position, born_velocity = new_particles(born)
                position = np.vstack([position, born_position])
                velocity = np.vstack([velocity, born_velocity])
                particle_id = np.concatenate([particle_id, born])
                next_id += n_born
        in_view = np.all((position >= 0) & (position <= fov), axis=1)
        visible = rng.random(len(position)) >= blink_probability
        records.append((np.full(in_view.sum(), frame), particle_id[in_view], position[in_view], visible[in_view]))

    frames = np.concatenate([r[0] for r in records]).astype(np.int64)
    particles = np.concatenate([r[1] for r in records]).astype(np.int64)
    positions = np.concatenate([r[2] for r in records]).reshape(-1, 3)
    visible = np.concatenate([r[3] for r in records]).astype(bool)

    # A new track_id whenever a particle re-enters the field of view.
    order = np.lexsort((frames, particles))
    frames, particles, positions, visible = frames[order], particles[order], positions[order], visible[order]
    new_segment = np.ones(len(frames), dtype=bool)
    new_segment[1:] = (particles[1:] != particles[:-1]) | (frames[1:] != frames[:-1] + 1)
    track_id = np.cumsum(new_segment) - 1
    return {
        "track_id": track_id.astype(np.int64),
        "frame": frames,
        "z": positions[:, 0].copy(),
        "y": positions[:, 1].copy(),
        "x": positions[:, 2].copy(),
        "visible": visible,
    }


def render_stack(
    ground_truth: Table,
    shape: Sequence[int],
    voxel_size_um: Sequence[float],
    psf_sigma_um: Sequence[float] = (0.6, 0.2, 0.2),
    snr: float = 6.0,
    background: float = 100.0,
    read_noise: float = 2.0,
    seed: int = 0,
    xp=np,
) -> np.ndarray:
    """Render visible particles to a noisy ``(T, Z, Y, X)`` uint16 stack.

    Each particle is an anisotropic Gaussian spot (the PSF) of peak amplitude
    ``snr * sigma_background`` above a uniform background, where
    ``sigma_background = sqrt(background + read_noise**2)`` is the noise of
    the background. Photon counts get Poisson shot noise and Gaussian read
    noise. Voxel ``k`` is centred at ``k * voxel_size`` µm.

    Parameters
    ----------
    ground_truth : Table
        From :func:`simulate_tracks` (``frame, z, y, x`` in µm; ``visible``).
    shape : (T, Z, Y, X) ints
        Stack shape in frames and voxels.
    voxel_size_um : (3,) floats
        Voxel size ``z, y, x`` in µm.
    psf_sigma_um : (3,) floats
        Gaussian PSF standard deviations ``z, y, x`` in µm.
    snr : float
        Peak signal over background noise.
    background, read_noise : float
        Mean background photons per voxel; read-noise standard deviation.
    seed : int
        Seed of the noise.
    xp : module
        ``numpy`` (default) or ``cupy``: where to render (the noise streams
        of the two differ). Returns an array of that module.
    """
    n_particles = int(np.unique(np.asarray(ground_truth["frame"]), return_counts=True)[1].max(initial=0))
    check_render(shape, voxel_size_um, psf_sigma_um, snr, n_particles, on_host=xp is np)
    if not all(np.isfinite(v) and v >= 0 for v in (background, read_noise)):
        raise ValueError(f"background and read_noise must be non-negative numbers, got {background}, {read_noise}")
    n_frames, *volume_shape = (int(s) for s in shape)
    voxel = np.asarray(voxel_size_um, dtype=np.float64)
    sigma_vox = np.asarray(psf_sigma_um, dtype=np.float64) / voxel
    amplitude = snr * np.sqrt(background + read_noise**2)
    radius = np.ceil(3.0 * sigma_vox).astype(int)
    offsets = np.stack(
        np.meshgrid(*[np.arange(-r, r + 1) for r in radius], indexing="ij"), axis=-1
    ).reshape(-1, 3)
    rng = xp.random.default_rng(seed)
    stack = xp.empty((n_frames, *volume_shape), dtype=xp.uint16)
    frame_of = np.asarray(ground_truth["frame"])
    visible = np.asarray(ground_truth.get("visible", np.ones(len(frame_of), bool)), dtype=bool)
    centres_all = np.column_stack([ground_truth[c] for c in ("z", "y", "x")]) / voxel
    offsets, sigma_vox, shape = xp.asarray(offsets), xp.asarray(sigma_vox), xp.asarray(volume_shape)
    n_voxels = int(np.prod(volume_shape))
    # Particles are splatted in chunks so that memory stays bounded (1M spots x 729 offsets would
    # need ~20 GB at once); one chunk for small problems, hence the same floating-point sums.
    chunk = max(1, RENDER_CHUNK_ELEMENTS // len(offsets))
    for t in range(n_frames):
        centres_t = centres_all[(frame_of == t) & visible]
        signal = xp.zeros(n_voxels)
        for start in range(0, len(centres_t), chunk):
            centres = xp.asarray(centres_t[start:start + chunk])
            voxels = xp.rint(centres).astype(xp.int64)[:, None, :] + offsets[None, :, :]  # (n, k, 3)
            delta = (voxels - centres[:, None, :]) / sigma_vox
            values = amplitude * xp.exp(-0.5 * xp.sum(delta**2, axis=-1))
            inside = xp.all((voxels >= 0) & (voxels < shape), axis=-1)
            inside_voxels = voxels[inside]
            flat = (inside_voxels[:, 0] * volume_shape[1] + inside_voxels[:, 1]) * volume_shape[2] + inside_voxels[:, 2]
            signal += xp.bincount(flat, weights=values[inside], minlength=n_voxels)
        photons = rng.poisson(background + signal).astype(xp.float64)
        photons += read_noise * rng.standard_normal(photons.shape)
        stack[t] = xp.clip(xp.rint(photons), 0, np.iinfo(np.uint16).max).reshape(volume_shape)
    return stack


def check_render(shape: Sequence[int], voxel_size_um: Sequence[float], psf_sigma_um: Sequence[float],
                 snr: float = 6.0, n_particles: int = 0, *, on_host: bool = True) -> None:
    """Check :func:`render_stack`'s arguments before any work: one-line ``ValueError`` (an ``InputError`` for the
    voxel size) naming the argument and its range.

    ``shape`` must be four positive whole numbers (T, Z, Y, X); the voxel size and PSF three positive finite
    numbers of µm; the PSF's σ within the volume's size along every axis of more than one plane; ``snr``
    finite and positive. ``on_host``: the memory of the stack and of rendering one frame with ``n_particles``
    particles (:data:`RENDER_BYTES_PER_VOXEL`, :data:`RENDER_BYTES_PER_SPLAT`) is refused up front when it
    exceeds :func:`tracker.validation.memory_budget` (on the GPU, CuPy reports its own out-of-memory error).
    """
    try:
        sizes = [float(s) for s in shape]
    except (TypeError, ValueError):
        sizes = []
    if len(sizes) != 4 or not all(math.isfinite(s) and s >= 1 and s == int(s) for s in sizes):
        raise ValueError(f"shape must be four positive whole numbers (T, Z, Y, X), got {tuple(shape)!r}")
    n_frames, *volume_shape = (int(s) for s in sizes)
    voxel = np.asarray(check_voxel_size(voxel_size_um))
    try:
        psf = np.array([float(v) for v in psf_sigma_um])
    except (TypeError, ValueError):
        psf = np.empty(0)
    if len(psf) != 3 or not np.all(np.isfinite(psf) & (psf > 0)):
        raise ValueError(f"--psf-sigma must be three positive numbers z,y,x in µm, got {psf_sigma_um!r}")
    SimulationParams(snr=snr)
    window = np.ceil(3.0 * psf / voxel)
    for axis in range(3):
        if volume_shape[axis] > 1 and psf[axis] / voxel[axis] > volume_shape[axis]:
            raise ValueError(f"--psf-sigma {psf[axis]:g} µm is {psf[axis] / voxel[axis]:.3g} voxels along "
                             f"{'zyx'[axis]} at a voxel size of {voxel[axis]:g} µm, wider than the volume's "
                             f"{volume_shape[axis]} voxels: check --psf-sigma and --voxel-size (both in µm)")
    if on_host:
        window_voxels = float(np.prod(2.0 * window + 1.0))
        n_voxels = float(np.prod(volume_shape))
        splats = max(window_voxels, min(n_particles * window_voxels, RENDER_CHUNK_ELEMENTS))  # (at once)
        needed = 2.0 * n_frames * n_voxels + RENDER_BYTES_PER_VOXEL * n_voxels + RENDER_BYTES_PER_SPLAT * splats
        check_memory(needed, f"rendering {n_frames} frames of {' × '.join(map(str, volume_shape))} voxels",
                     "give a smaller --shape or fewer --frames")


def mean_nearest_neighbour_distance(ground_truth: Table) -> float:
    """Mean distance (µm) from each particle to its nearest neighbour in the same frame."""
    from scipy.spatial import cKDTree

    distances = []
    frames = np.asarray(ground_truth["frame"])
    positions = np.column_stack([ground_truth[c] for c in ("z", "y", "x")])
    for t in np.unique(frames):
        points = positions[frames == t]
        if len(points) > 1:
            d, _ = cKDTree(points).query(points, k=2)
            distances.append(d[:, 1])
    return float(np.mean(np.concatenate(distances))) if distances else float("nan")


def gated_frame_pair(
    n_particles: int,
    step_over_nn: float,
    *,
    seed: int = 0,
    gate_factor: float = 3.0,
    kept_fraction: float = 0.97,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int], float]:
    """A synthetic frame-to-frame linking problem in 3D (for solver tests and benchmarks).

    ``n_particles`` points uniform in a cube of volume ``n_particles`` (density 1),
    moved by Gaussian steps of RMS length ``step_over_nn`` times their mean
    nearest-neighbour distance; a random ``1 - kept_fraction`` of them vanish
    and the rest are shuffled. Candidates are the pairs closer than
    ``gate_factor`` RMS steps, at cost = squared distance.

    Returns
    -------
    rows, cols : (k,) int64 arrays
        Candidate links (point in the first frame, point in the second).
    cost : (k,) float64 array
        Squared distances (units of the cube).
    shape : (int, int)
        Points in the first and second frame.
    no_link_cost : float
        1.05 times the largest candidate cost (Jaqaman et al. 2008).
    """
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    points = rng.random((n_particles, 3)) * n_particles ** (1 / 3)
    nn = cKDTree(points).query(points, k=2)[0][:, 1].mean()
    moved = points + rng.normal(0, step_over_nn * nn / np.sqrt(3), points.shape)
    moved = moved[rng.permutation(n_particles)][: int(n_particles * kept_fraction)]
    pairs = cKDTree(points).sparse_distance_matrix(cKDTree(moved), gate_factor * step_over_nn * nn,
                                                   output_type="coo_matrix")
    cost = pairs.data**2
    no_link_cost = 1.05 * float(cost.max()) if cost.size else 1.0
    return pairs.row.astype(np.int64), pairs.col.astype(np.int64), cost, (n_particles, len(moved)), no_link_cost


CONFOCAL_SUPERSAMPLING = 5
"""Sub-samples per voxel and axis with which :func:`render_camera_stack` integrates a non-Gaussian PSF."""


def confocal_psf(offsets_um: np.ndarray, width_um: Sequence[float]) -> np.ndarray:
    """A confocal-like PSF (not normalised): ``jinc⁴`` across, ``sinc⁴`` along the optical axis.

    The product of an Airy-disc excitation and detection (``[2 J₁(v)/v]⁴``,
    ``v = r / w_xy``) and a ``sinc⁴(z / w_z)`` axial profile: the shape of a
    confocal spot, side lobes included, and no Gaussian. Its best-fitting
    Gaussian has σ ≈ ``0.84 w_z`` along z and ``0.97 w_xy`` across
    (:func:`gaussian_equivalent_sigma` computes it).

    Parameters
    ----------
    offsets_um : (..., 3) floats
        Offsets ``z, y, x`` from the spot's centre (µm).
    width_um : (3,) floats
        ``w_z, w_y, w_x`` (µm).
    """
    offsets_um = np.asarray(offsets_um, dtype=np.float64)
    return _confocal_axial(offsets_um[..., 0], width_um[0]) * _confocal_lateral(
        offsets_um[..., 1], offsets_um[..., 2], width_um[1:])


def _confocal_axial(z_um: np.ndarray, width_um: float) -> np.ndarray:
    return np.sinc(np.asarray(z_um) / width_um / np.pi) ** 4


def _confocal_lateral(y_um: np.ndarray, x_um: np.ndarray, width_um: Sequence[float]) -> np.ndarray:
    from scipy.special import j1

    v = np.sqrt((np.asarray(y_um) / width_um[0]) ** 2 + (np.asarray(x_um) / width_um[1]) ** 2)
    safe = np.where(v == 0, 1.0, v)
    return np.where(v == 0, 1.0, 2.0 * j1(safe) / safe) ** 4


def gaussian_equivalent_sigma(width_um: Sequence[float]) -> np.ndarray:
    """σ (µm, ``z, y, x``) of the Gaussians that best fit :func:`confocal_psf`'s profiles along each axis."""
    from scipy.optimize import curve_fit

    sigma = []
    for axis, width in enumerate(width_um):
        u = np.linspace(-6 * width, 6 * width, 2001)
        offsets = np.zeros((len(u), 3))
        offsets[:, axis] = u
        profile = confocal_psf(offsets, width_um)
        (s,), _ = curve_fit(lambda x, s: np.exp(-0.5 * (x / s) ** 2), u, profile, p0=[0.5 * width])
        sigma.append(abs(s))
    return np.array(sigma)


def render_camera_stack(
    ground_truth: Table,
    shape: Sequence[int],
    voxel_size_um: Sequence[float],
    psf: str = "gaussian",
    psf_size_um: Sequence[float] = (0.6, 0.2, 0.2),
    photons: float = 500.0,
    background_photons: float = 10.0,
    read_noise_e: float = 1.5,
    gain: float = 2.0,
    offset: float = 100.0,
    seed: int = 0,
) -> np.ndarray:
    """Render visible particles as a camera records them: ``(T, Z, Y, X)`` uint16 counts (ADU).

    Unlike :func:`render_stack` (a Gaussian evaluated at voxel centres, of a
    given peak SNR), each spot emits ``photons`` photons in all, spread by the
    PSF and *integrated over each voxel* (exactly, with error functions, for a
    Gaussian; by :data:`CONFOCAL_SUPERSAMPLING`³ sub-samples for the confocal
    PSF); the camera adds Poisson shot noise to signal plus background, read
    noise (electrons), a gain (ADU per electron) and an offset. Voxel ``k``
    covers ``[k − ½, k + ½] × voxel`` µm.

    Parameters
    ----------
    ground_truth : Table
        ``frame, z, y, x`` (µm) and optionally ``visible``.
    shape : (T, Z, Y, X) ints
    voxel_size_um : (3,) floats
    psf : {"gaussian", "confocal"}
        ``psf_size_um`` is the Gaussian's σ, or the confocal PSF's widths
        (:func:`confocal_psf`).
    photons : float
        Photons per spot (expected total).
    background_photons : float
        Expected background photons per voxel.
    read_noise_e, gain, offset : float
        Camera read noise (e⁻ RMS), gain (ADU/e⁻) and offset (ADU).
    seed : int
        Seed of the noise.
    """
    from scipy.special import erf

    if psf not in ("gaussian", "confocal"):
        raise ValueError(f"psf must be 'gaussian' or 'confocal', got {psf!r}")
    n_frames, *volume_shape = (int(s) for s in shape)
    voxel = np.asarray(voxel_size_um, dtype=np.float64)
    size = np.asarray(psf_size_um, dtype=np.float64)
    reach = np.ceil(4.0 * size / voxel).astype(int)  # Gaussian: 4σ; confocal: past the main lobes (3.1, 3.8 w)
    windows = [np.arange(-r, r + 2) for r in reach]  # voxel offsets from the one below the centre
    sub = (np.arange(CONFOCAL_SUPERSAMPLING) + 0.5) / CONFOCAL_SUPERSAMPLING - 0.5
    normalisation = 1.0
    if psf == "confocal":  # the PSF's integral over the window, on the same sub-sample grid
        axes = [(np.arange(-r, r + 1)[:, None] + sub[None, :]).ravel() * v for r, v in zip(reach, voxel)]
        normalisation = float(_confocal_axial(axes[0], size[0]).sum()
                              * _confocal_lateral(axes[1][:, None], axes[2][None, :], size[1:]).sum())
    rng = np.random.default_rng(seed)
    frame_of = np.asarray(ground_truth["frame"])
    visible = np.asarray(ground_truth.get("visible", np.ones(len(frame_of), bool)), dtype=bool)
    centres_all = np.column_stack([ground_truth[c] for c in ("z", "y", "x")]) / voxel
    stack = np.empty((n_frames, *volume_shape), dtype=np.uint16)
    for t in range(n_frames):
        expected = np.full(volume_shape, float(background_photons))
        for centre in centres_all[(frame_of == t) & visible]:
            base = np.floor(centre).astype(int)
            index = [b + w for b, w in zip(base, windows)]
            if psf == "gaussian":
                weights = []
                for a in range(3):
                    edges = (np.append(index[a], index[a][-1] + 1) - 0.5 - centre[a]) * voxel[a]
                    cdf = 0.5 * erf(edges / (np.sqrt(2.0) * size[a]))
                    weights.append(np.diff(cdf))
                values = weights[0][:, None, None] * weights[1][None, :, None] * weights[2][None, None, :]
            else:  # separable into z and (y, x): integrate each over its sub-samples
                n = CONFOCAL_SUPERSAMPLING
                axes = [((i[:, None] + sub[None, :]).ravel() - c) * v for i, c, v in zip(index, centre, voxel)]
                axial = _confocal_axial(axes[0], size[0]).reshape(-1, n).sum(axis=1)
                lateral = _confocal_lateral(axes[1][:, None], axes[2][None, :], size[1:])
                lateral = lateral.reshape(len(index[1]), n, len(index[2]), n).sum(axis=(1, 3))
                values = axial[:, None, None] * lateral[None, :, :] / normalisation
            inside = [(i >= 0) & (i < n) for i, n in zip(index, volume_shape)]
            values = values[np.ix_(*inside)]
            target = np.ix_(*[i[m] for i, m in zip(index, inside)])
            expected[target] += photons * values
        electrons = rng.poisson(expected) + read_noise_e * rng.standard_normal(volume_shape)
        counts = offset + gain * electrons
        stack[t] = np.clip(np.rint(counts), 0, np.iinfo(np.uint16).max)
    return stack
