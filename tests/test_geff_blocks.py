"""GEFF written block by block (tracker.io.geff_blocks): the graph and metadata that write_geff gives for the
whole table, atomically."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("geff")
pytest.importorskip("zarr", minversion="3")

from tracker.errors import InputError  # noqa: E402
from tracker.io.geff import read_geff, write_geff  # noqa: E402
from tracker.io.geff_blocks import geff_blocks  # noqa: E402


def tracks_table(seed: int = 0, n_tracks: int = 60, n_frames: int = 40) -> dict:
    """Tracks with gaps (a track skips frames), in frame order, ids by first appearance, NaN at track starts."""
    rng = np.random.default_rng(seed)
    rows = [(k, t) for k in range(n_tracks) for t in np.sort(rng.choice(n_frames, rng.integers(1, 12), replace=False))]
    track, frame = np.array(rows).T
    order = np.lexsort((track, frame))
    track, frame = track[order], frame[order]
    first_seen = {k: i for i, k in reversed(list(enumerate(track)))}
    ids = np.argsort(np.argsort([first_seen[k] for k in range(n_tracks)]))
    track = ids[track]
    start = np.ones(len(track), dtype=bool)
    seen: set[int] = set()
    for i, k in enumerate(track):
        start[i] = k not in seen
        seen.add(int(k))
    n = len(track)
    return {"track_id": track, "frame": frame, "z": rng.random(n), "y": rng.random(n) * 20, "x": rng.random(n) * 30,
            "intensity": rng.random(n), "link_cost": np.where(start, np.nan, rng.random(n)),
            "link_confidence": np.where(start, np.nan, rng.random(n))}


@pytest.mark.parametrize("block_frames, ndim", [(1, 3), (7, 3), (40, 3), (7, 2)])
def test_blocks_give_the_whole_tables_graph_and_metadata(tmp_path, block_frames, ndim):
    table = tracks_table()
    if ndim == 2:
        del table["z"]
    parameters = {"linking": {"max_displacement_um": 1.5}}
    write_geff(tmp_path / "whole.geff", table, parameters=parameters)
    with geff_blocks(tmp_path / "blocks.geff") as writer:
        for low in range(0, 40, block_frames):
            rows = (table["frame"] >= low) & (table["frame"] < low + block_frames)
            writer.write({k: v[rows] for k, v in table.items()})
        assert not (tmp_path / "blocks.geff").exists()  # (it appears whole, at the end)
        writer.parameters = parameters
    assert writer.n_nodes == len(table["frame"]) and writer.n_edges == len(table["frame"]) - 60
    whole, blocks = read_geff(tmp_path / "whole.geff"), read_geff(tmp_path / "blocks.geff")
    assert list(blocks) == list(whole)
    for name, column in whole.items():
        np.testing.assert_array_equal(blocks[name], column, err_msg=name)
    attributes = [json.loads((tmp_path / f"{name}.geff" / ".zattrs").read_text()) for name in ("whole", "blocks")]
    assert attributes[0] == attributes[1]  # (axes' extent, properties, parameters)


def test_an_error_leaves_nothing_and_other_columns_are_refused(tmp_path):
    table = tracks_table()
    old = {k: v[:5] for k, v in table.items()}
    write_geff(tmp_path / "old.geff", old)
    with pytest.raises(RuntimeError, match="a worker died"), geff_blocks(tmp_path / "old.geff", overwrite=True) as w:
        w.write(table)
        raise RuntimeError("a worker died")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.geff"]
    assert len(read_geff(tmp_path / "old.geff")["frame"]) == 5  # (untouched)
    with pytest.raises(InputError, match="exists"), geff_blocks(tmp_path / "old.geff"):
        pass
    with pytest.raises(InputError, match="column 'label' is not numeric"), geff_blocks(tmp_path / "a.geff") as w:
        w.write({**table, "label": np.array(["a"] * len(table["frame"]), dtype=object)})
    with pytest.raises(ValueError, match="columns differ"), geff_blocks(tmp_path / "b.geff") as w:
        w.write(table)
        w.write({k: v for k, v in table.items() if k != "intensity"})
    with geff_blocks(tmp_path / "empty.geff") as w:  # (no block at all: the empty graph)
        pass
    assert len(read_geff(tmp_path / "empty.geff")["frame"]) == 0
