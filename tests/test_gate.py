"""The gate estimated from the detections (tracker/linking/gate.py) and its wiring: linker, summary, CLI."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tracker import io
from tracker.cli import main
from tracker.linking import link_detections
from tracker.linking import gate as gate_module
from tracker.linking.gate import FALLBACK_GATE_UM, GATE_MARGIN, MAX_GATE_NN, GateEstimate, estimate_gate
from tracker.metrics import evaluate
from tracker.params import LINKING_DEFAULTS, LinkingParams, read_toml
from tracker.scenarios import simulate_scenario

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "sample.tif"


def observed_cell(name: str, ndim: int, sigma_px: float, false_per_frame: int, seed: int = 0):
    """A scenario's truth, its detections (truth + Gaussian noise of ``sigma_px`` pixels per axis, plus uniform
    false points) and the 99th percentile of the steps between the detections of one track (µm): the gate the
    truth gives."""
    truth = simulate_scenario(name, 250, 25, ndim=ndim, seed=seed)
    axes = ["z", "y", "x"][3 - ndim:]
    pixel = np.array([0.3, 0.1, 0.1][3 - ndim:])
    field = np.array([16, 512, 512][3 - ndim:]) * pixel
    rng = np.random.default_rng(seed + 1)
    positions = np.column_stack([truth[a] for a in axes]) + rng.normal(0, 1, (len(truth["frame"]), ndim)) * (
        sigma_px * pixel)
    same = (truth["track_id"][1:] == truth["track_id"][:-1])
    step_q99 = float(np.quantile(np.linalg.norm(np.diff(positions, axis=0)[same], axis=1), 0.99))
    frames = np.asarray(truth["frame"])
    n_false = false_per_frame * 25
    false_frames = np.repeat(np.arange(25), false_per_frame)
    positions = np.concatenate([positions, rng.random((n_false, ndim)) * field])
    frames = np.concatenate([frames, false_frames])
    order = np.lexsort((rng.random(len(frames)), frames))
    detections = {"frame": frames[order], **{a: positions[order, k] for k, a in enumerate(axes)}}
    return truth, detections, step_q99


@pytest.mark.parametrize("name, ndim, sigma_px, false_per_frame", [
    ("vesicle", 2, 0.0, 0), ("vesicle", 2, 1.0, 10), ("receptor", 2, 0.5, 2), ("microtubule", 2, 0.5, 2),
    ("switching", 2, 0.0, 0), ("vesicle", 3, 0.5, 5), ("virus", 3, 1.0, 10),
])
def test_estimate_is_near_the_gate_the_truth_gives(name, ndim, sigma_px, false_per_frame):
    """Brownian, switching and directed motion, 2D and 3D (0.3 µm z pixels: anisotropic noise), with and without
    false detections: the true steps' 99th percentile within 10 % (the estimator's measured error is under 7 % on
    the benchmark's cells), and the gate between it and GATE_MARGIN times it."""
    _, detections, step_q99 = observed_cell(name, ndim, sigma_px, false_per_frame)
    estimate = estimate_gate(detections)
    assert estimate.source == "estimated" and estimate.bound is None
    assert estimate.step_um == pytest.approx(step_q99, rel=0.10)
    assert estimate.step_um <= estimate.value_um <= GATE_MARGIN * estimate.step_um + 1e-12


def test_estimated_gate_links_as_well_as_the_truths():
    """Link F1 with the estimated gate within 0.005 of the gate a user knowing the truth would set (1.5 × q99,
    benchmarks/generalization_bench.py) on a hard cell of directed runs among false detections."""
    truth, detections, step_q99 = observed_cell("microtubule", 2, 1.0, 10)
    estimated = evaluate(link_detections(detections, solver="scipy"), truth, 0.3)["link_f1_given_detections"]
    told = evaluate(link_detections(detections, 1.5 * step_q99, solver="scipy"), truth, 0.3)
    assert estimated >= told["link_f1_given_detections"] - 0.005


def test_equivariant_and_deterministic():
    """Same detections: same gate, whatever the row order; scaled coordinates: the gate scales; frames numbered
    0, 3, 6, …: the same gate; a 2D table and the same with z = 0: the same gate."""
    _, detections, _ = observed_cell("receptor", 2, 0.5, 2)
    value = estimate_gate(detections).value_um
    order = np.random.default_rng(0).permutation(len(detections["frame"]))
    assert estimate_gate({k: v[order] for k, v in detections.items()}).value_um == pytest.approx(value, rel=1e-9)
    scaled = {"frame": detections["frame"], "y": 3.0 * detections["y"], "x": 3.0 * detections["x"]}
    assert estimate_gate(scaled).value_um == pytest.approx(3.0 * value, rel=1e-9)
    strided = dict(detections, frame=3 * detections["frame"] + 7)
    assert estimate_gate(strided).value_um == pytest.approx(value, rel=1e-12)
    flat = dict(detections, z=np.zeros(len(detections["frame"])))
    assert estimate_gate(flat).value_um == pytest.approx(value, rel=1e-12)


def test_bounds(monkeypatch):
    """Memory: a budget that admits only a small gate caps it (and says so); spacing: the gate stops at
    MAX_GATE_NN nearest-neighbour distances (lowered here below the steps)."""
    _, detections, _ = observed_cell("vesicle", 2, 0.5, 2)
    free = estimate_gate(detections)
    capped = estimate_gate(detections, memory_budget=2_700)  # (about 19 candidate links: a gate near 0.45 µm)
    assert capped.bound == "memory" and capped.value_um < free.value_um
    assert "memory bound" in str(capped)
    monkeypatch.setattr(gate_module, "MAX_GATE_NN", 0.2)  # (steps 0.3 of the spacing: beyond this ceiling)
    estimate = estimate_gate(detections)
    assert estimate.bound == "upper" and estimate.value_um <= 0.2 * estimate.spacing_um + 1e-12
    assert "upper bound" in str(estimate)


@pytest.mark.parametrize("rows", [0, 1])
def test_no_step_falls_back(rows):
    detections = {"frame": np.arange(rows), "y": np.arange(rows) * 0.3, "x": np.zeros(rows)}
    estimate = estimate_gate(detections)
    assert estimate.source == "fallback" and estimate.value_um == FALLBACK_GATE_UM
    assert str(estimate).startswith(f"gate {FALLBACK_GATE_UM:g} µm (fallback: ")
    tracks, summary = link_detections(detections, return_summary=True)
    assert len(tracks["frame"]) == rows
    assert "(fallback" in str(summary)


@pytest.mark.parametrize("step_um", [0.05, 0.3, 4.0])
def test_a_lone_particle_is_linked_whatever_its_step(step_um):
    """One particle (no same-frame spacing, a few steps): the gate follows its median step, not a constant in µm."""
    rng = np.random.default_rng(5)
    positions = np.cumsum(rng.normal(0, step_um / np.sqrt(3), (12, 3)), axis=0)
    detections = {"frame": np.arange(12), "z": positions[:, 0], "y": positions[:, 1], "x": positions[:, 2]}
    estimate = estimate_gate(detections)
    lengths = np.linalg.norm(np.diff(positions, axis=0), axis=1)
    assert estimate.source == "fallback" and "median step" in estimate.note
    assert lengths.max() <= estimate.value_um <= 6 * np.median(lengths)
    tracks, summary = link_detections(detections, return_summary=True)
    assert len(np.unique(tracks["track_id"])) == 1 and "(fallback" in str(summary)


def test_few_particles_gate_is_bounded_by_their_spacing():
    """Two particles 1 µm apart, 5 frames: the median-step gate stays under twice their spacing."""
    frames = np.repeat(np.arange(5), 2)
    y = np.tile([0.0, 1.0], 5) + np.repeat(np.arange(5), 2) * 0.9  # (steps of 0.9 µm: as far as the neighbour)
    estimate = estimate_gate({"frame": frames, "y": y, "x": np.zeros(10)})
    assert estimate.source == "fallback" and estimate.value_um <= 2.0 * 1.0 + 1e-9


def test_user_value_wins_and_the_summary_reports_the_estimate():
    _, detections, _ = observed_cell("vesicle", 2, 0.5, 2)
    _, given = link_detections(detections, 0.37, return_summary=True)
    assert given.gate == GateEstimate.given(0.37) and "gate" not in str(given)  # (the user's own value)
    tracks, estimated = link_detections(detections, return_summary=True)
    assert estimated.gate.source == "estimated"
    assert re.match(r"linking: gate \d\.\d+ µm \(estimated\), ", str(estimated)), str(estimated)
    again = link_detections(detections, estimated.gate.value_um)
    assert all(np.array_equal(tracks[k], again[k], equal_nan=True) for k in tracks)
    assert LINKING_DEFAULTS.max_displacement_um is None
    assert LinkingParams(max_displacement_um=None).max_displacement_um is None
    with pytest.raises(ValueError, match="--max-displacement must be > 0"):
        link_detections(detections, 0.0)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_link_command_reports_saves_and_reproduces_the_gate(tmp_path):
    _, detections, _ = observed_cell("virus", 3, 0.5, 2)
    path = tmp_path / "det.csv"
    io.write_table(path, detections)
    result = invoke("link", path, "-o", tmp_path / "a.csv", "--solver", "scipy")
    assert result.exit_code == 0, result.output
    gate = re.search(r"gate (\d\.\d+) µm \(estimated\)", result.output)
    assert gate, result.output
    saved = read_toml(tmp_path / "a.params.toml")[1].max_displacement_um
    assert saved == pytest.approx(float(gate.group(1)), abs=0.0051)
    result = invoke("link", path, "-o", tmp_path / "b.csv", "--config", tmp_path / "a.params.toml")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert (tmp_path / "a.params.toml").read_bytes() == (tmp_path / "b.params.toml").read_bytes()
    assert invoke("link", path, "-o", tmp_path / "c.csv", "--max-displacement", "0.8", "-q").exit_code == 0
    assert read_toml(tmp_path / "c.params.toml")[1].max_displacement_um == 0.8


def test_run_command_round_trip(tmp_path):
    """``track run`` with no gate: estimated, reported, saved as used; ``--config`` gives the same bytes."""
    result = invoke("run", SAMPLE, "-o", tmp_path / "a.csv", "--spot-radius", "0.8,0.3,0.3", "--solver", "scipy")
    assert result.exit_code == 0, result.output
    assert re.search(r"linking: gate \d\.\d+ µm \(estimated\)", result.output), result.output
    saved = read_toml(tmp_path / "a.params.toml")[1]
    assert saved.max_displacement_um is not None
    result = invoke("run", SAMPLE, "-o", tmp_path / "b.csv", "--config", tmp_path / "a.params.toml", "-q")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert (tmp_path / "a.params.toml").read_bytes() == (tmp_path / "b.params.toml").read_bytes()


def test_still_points_get_the_lower_bound():
    """Particles that do not move, localised exactly: no step to measure; the gate is the lower bound (a tenth of
    the spacing) and every particle is one track."""
    rng = np.random.default_rng(0)
    points = rng.random((100, 3)) * 20
    detections = {"frame": np.repeat(np.arange(5), 100), **{a: np.tile(points[:, k], 5) for k, a in enumerate("zyx")}}
    estimate = estimate_gate(detections)
    assert estimate.bound == "lower" and estimate.value_um == pytest.approx(0.1 * estimate.spacing_um)
    assert len(np.unique(link_detections(detections)["track_id"])) == 100


@pytest.mark.parametrize("ndim, stride, voxels, budget", [(3, 1, True, None), (2, 1, False, None),
                                                           (3, 3, False, None), (3, 1, True, 20_000)])
def test_the_whole_tables_inputs_give_its_gate_from_the_frames_looked_at(ndim, stride, voxels, budget, monkeypatch):
    """GateInputs merged from parts of a table (a frame split between two) stand for the whole table: the gate
    from the frames it looks at alone equals the whole table's (memory bound and voxel scale included)."""
    from tracker.linking.gate import GateInputs
    from tracker.simulate import simulate_tracks
    from tracker.validation import check_detections

    monkeypatch.setattr(gate_module, "MAX_FRAME_PAIRS", 5)
    truth = simulate_tracks(300, 40, (8.0, 30.0, 30.0), 0.5, 0.6, blink_probability=0.05, seed=3)
    visible = truth["visible"].astype(bool)
    axes = "zyx"[3 - ndim:]
    table = {"frame": truth["frame"][visible] * stride, **{a: truth[a][visible] for a in axes}}
    if voxels:
        table.update({f"{a}_vox": table[a] / 0.2 for a in axes})
    table = check_detections(table)
    cut = np.searchsorted(table["frame"], 20 * stride) + 7  # (frame 20's points in two parts)
    parts = [{k: v[:cut] for k, v in table.items()}, {k: v[cut:] for k, v in table.items()}]
    whole = GateInputs.merge([GateInputs.of(part) for part in parts])
    assert np.array_equal(whole.frames, np.unique(table["frame"])) and whole.counts.sum() == len(table["frame"])
    looked_at = np.isin(table["frame"], whole.frames_looked_at())
    assert 0 < looked_at.sum() < len(table["frame"]) / 3
    sample = {k: v[looked_at] for k, v in table.items()}
    expected = estimate_gate(table, memory_budget=budget)
    assert expected.source == "estimated" and (budget is None or expected.bound == "memory")
    assert estimate_gate(sample, whole=whole, memory_budget=budget) == expected
    empty = GateInputs.of({k: v[:0] for k, v in table.items()})
    assert GateInputs.merge([empty, whole]).extremes.keys() == whole.extremes.keys()
    assert estimate_gate({k: v[:0] for k, v in table.items()}, whole=empty).source == "fallback"


def test_an_empty_tail_bin_does_not_cut_the_gate():
    # a few hundred steps leave tail bins empty by chance: the true steps beyond the empty bins at 1.6-1.75 µm
    # still count (the gate's expected cost is least past them), where the first "rarer than false" bin stopped
    from tracker.linking.gate import _true_steps

    lengths = np.concatenate([np.linspace(0.1, 1.6, 150), [1.75, 1.8, 1.9, 1.95], [2.2, 2.5]])  # (two false)
    quantile, crossing = _true_steps(lengths, np.linspace(0.5, 10.0, 2000), 0.8, 2.6)
    assert crossing >= 1.95 and quantile >= 1.9  # (the first-bin rule gave 1.625)
