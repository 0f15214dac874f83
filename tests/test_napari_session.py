"""Review sessions in the viewer (plugins/napari_tracker/_session_keeper.py, the reader): saving beside the
tracks, autosave, restoring on open with the history, a session opened by itself. Needs napari and a display
(see test_napari_plugin.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

napari = pytest.importorskip("napari")
pytest.importorskip("pytestqt")

from napari_helpers import PLUGIN, add_widget, open_tracks, run_sample, viewer  # noqa: E402, F401 (fixture)
from test_napari_session_file import linked  # noqa: E402, F401 (fixture)

from napari_tracker._edits import TrackEdits  # noqa: E402
from napari_tracker._session import save_session, session_path  # noqa: E402

pytestmark = pytest.mark.napari


def test_save_autosave_and_reopen_restores_the_review(viewer, qtbot, tmp_path):
    widget = run_sample(viewer, qtbot)
    review, links = widget.review, widget.links
    links.next_link()
    links.accept()
    rejected = links.current
    source = int(review.edits.predecessor_rows()[rejected])
    links.reject()
    assert review.edits.predecessor_rows()[rejected] != source
    path = tmp_path / "sample tracks.csv"
    widget.review_panel.save(path)  # Save tracks…: the session goes beside them
    session = session_path(path)
    assert session.is_file() and widget.sessions.last_saved == session
    # An edit after saving is autosaved (here at once instead of a second later).
    links.next_link()
    links.accept()
    assert widget.sessions.pending
    widget.sessions.flush()
    assert not widget.sessions.pending
    before = review.edits.output_table()
    n_edits, forbidden = review.edits.n_edits, set(review.edits.forbidden)
    pinned = review.edits.column("pinned").copy()
    current = links.current
    # Open the tracks file again in a new viewer: the session beside it is restored, history included.
    widget.close_widget()
    viewer.layers.clear()
    layer = open_tracks(viewer, path)
    assert layer.metadata["session"] == str(session)
    widget2 = add_widget(viewer)
    widget2.review_panel.tracks_choice.choose(layer)
    edits = widget2.review.edits
    after = edits.output_table()
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert edits.n_edits == n_edits and edits.forbidden == forbidden
    np.testing.assert_array_equal(edits.column("pinned"), pinned)
    assert widget2.links.current == current
    assert layer.metadata["parameters"]["max_displacement_um"] == pytest.approx(
        widget.review.layer.metadata["parameters"]["max_displacement_um"])
    assert widget2.links.progress_text().startswith("2 of")
    # Undo goes on where the review stopped: back to before the rejection.
    widget2.review.undo()
    widget2.review.undo()
    assert not edits.forbidden and edits.predecessor_rows()[rejected] == source


def test_a_tracks_file_newer_than_its_session_wins(viewer, tracks_csv_with_session):
    tracks, session = tracks_csv_with_session
    later = session.stat().st_mtime + 10
    os.utime(tracks, (later, later))
    with pytest.warns(UserWarning, match="newer than its review session"):
        layer = open_tracks(viewer, tracks)
    assert "session" not in layer.metadata


@pytest.fixture
def tracks_csv_with_session(tmp_path, linked):
    from tracker.io import write_table

    tracks = tmp_path / "t.csv"
    write_table(tracks, linked)
    session = save_session(session_path(tracks), TrackEdits(linked), {})
    return tracks, session


def test_a_session_file_opens_by_itself(viewer, tracks_csv_with_session):
    _, session = tracks_csv_with_session
    layers = viewer.open(str(session), plugin=PLUGIN)
    assert len(layers) == 1 and layers[0].metadata["session"] == str(session)
