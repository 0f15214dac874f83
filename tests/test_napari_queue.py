"""Link-by-link review in the viewer (plugins/napari_tracker/_link_review.py, _queue_panel.py): the queue's
keys, camera and highlights, accept / reject with a local re-solve as one undoable edit, pinning a track.
Needs napari and a display (see test_napari_plugin.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

napari = pytest.importorskip("napari")
pytest.importorskip("pytestqt")

from napari_helpers import run_sample, viewer  # noqa: E402, F401 (fixture)

from napari_tracker._shortcuts import SHORTCUTS  # noqa: E402
from napari_tracker._view import camera  # noqa: E402

pytestmark = pytest.mark.napari


def links_of(edits):
    pred = edits.predecessor_rows()
    return {(int(pred[j]), int(j)) for j in np.flatnonzero(pred >= 0)}


def press(viewer, name):
    from napari.utils.key_bindings import KeyBinding

    callback = viewer.keymap[KeyBinding.from_str(SHORTCUTS[name])]
    callback(viewer)


@pytest.fixture
def tracked(viewer, qtbot):
    return run_sample(viewer, qtbot)


def test_next_goes_to_the_least_confident_link_centred_zoomed_and_highlighted(viewer, tracked):
    widget = tracked
    links, review = widget.links, widget.review
    edits = review.edits
    parameters = review.layer.metadata["parameters"]  # the run's linking parameters drive the re-solve
    assert links.decisions.options["max_displacement_um"] == parameters["max_displacement_um"]
    assert links.decisions.options.get("max_gap") == parameters.get("max_gap")
    zoom_before = camera(viewer).zoom
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # (no private napari names through the plugin's proxy)
        press(viewer, "next")
    row = links.current
    confidence = edits.column("link_confidence")
    live_links = np.array(sorted(j for _, j in links_of(edits)))
    assert confidence[row] == np.nanmin(confidence[live_links])
    assert int(viewer.dims.point[0]) == edits.column("frame")[row]
    source = int(edits.predecessor_rows()[row])
    centre = np.mean([[edits.column(c)[r] for c in ("y", "x")] for r in (source, row)], axis=0)
    np.testing.assert_allclose(np.asarray(camera(viewer).center)[-2:], centre, atol=1e-6)
    assert camera(viewer).zoom > zoom_before
    assert review.selected_track == edits.column("track_id")[row] and review.selected_row == row
    drawn = viewer.layers["selected track"]  # the whole track, in the selection colour
    np.testing.assert_array_equal(drawn.data[:, 1], edits.column("frame")[edits.track_rows(review.selected_track)])
    np.testing.assert_allclose(drawn.track_colors[:, :3], [[1.0, 1.0, 0.0]] * len(drawn.data))
    marks = viewer.layers["link under review"]
    assert marks.visible and len(marks.data) == 4
    np.testing.assert_allclose(marks.data[:2, 2:], [[edits.column(c)[r] for c in ("y", "x")]
                                                    for r in (source, row)])
    # both drawn in the link's plane (the view's), where the projected track shows them
    np.testing.assert_allclose(marks.data[:, 1], edits.column("z")[row])
    assert viewer.dims.point[1] == pytest.approx(edits.column("z")[row]) and np.all(marks.shown)
    assert "0 of" in widget.queue_panel.progress.text()
    assert "confidence" in widget.queue_panel.link_text.text()
    press(viewer, "next")
    second = links.current
    assert second != row and confidence[second] >= confidence[row]
    press(viewer, "previous")
    assert links.current == row


def test_accept_pins_and_moves_on_reject_relinks_in_place_and_undo_restores(viewer, tracked):
    widget = tracked
    links, review = widget.links, widget.review
    layer, edits = review.layer, review.edits
    press(viewer, "next")
    first = links.current
    press(viewer, "accept")
    assert edits.column("pinned")[first] and edits.column("reviewed")[first]
    total = len(links_of(edits))
    assert widget.queue_panel.progress.text() == f"1 of {total} reviewed"
    row = links.current
    assert row != first
    source = int(edits.predecessor_rows()[row])
    data_before = layer.data.copy()
    n_layers = len(viewer.layers)
    press(viewer, "reject")
    assert (source, row) not in links_of(edits) and (source, row) in edits.forbidden
    assert review.layer is layer and len(viewer.layers) == n_layers  # the same layer, updated in place
    assert not np.array_equal(layer.data, data_before)
    assert edits.column("pinned")[first]  # the earlier decision stands
    assert "re-solved" in edits.undo_description
    n_edits = edits.n_edits
    review.undo()  # one undo takes the whole re-solve back
    assert edits.n_edits == n_edits - 1
    np.testing.assert_array_equal(layer.data, data_before)
    assert (source, row) in links_of(edits) and not edits.forbidden


def test_pin_track_pins_every_link_of_the_selected_track(viewer, tracked):
    widget = tracked
    review = widget.review
    edits = review.edits
    track = int(edits.summary()["track_id"][np.argmax(edits.summary()["length"])])
    review.select(track)
    widget.queue_panel.buttons["pin_track"].click()
    rows = edits.track_rows(track)
    assert np.all(edits.column("pinned")[rows[1:]])
    assert widget.queue_panel.progress.text().startswith(f"{len(rows) - 1} of")


def test_order_by_ground_truth_puts_wrong_links_first(viewer, tracked):
    widget = tracked
    review = widget.review
    assert review.correct is not None  # the sample's ground truth is loaded with it
    # The sample tracks without a wrong link: swap two tracks' points of one frame (links a person made
    # have confidence 1, last in the confidence order).
    edits = review.edits
    summary = edits.summary()
    a, b = (int(t) for t in summary["track_id"][np.argsort(-summary["length"])[:2]])
    frame = int(max(summary["start"][summary["track_id"] == a][0], summary["start"][summary["track_id"] == b][0])) + 2
    assert widget.corrections.reassign_point(edits.point_at(a, frame), b)
    widget.queue_panel.order_combo.setCurrentText("ground truth")
    assert widget.links.order == "ground truth"
    widget.links.next_link()
    live = review.edits.rows()
    position = int(np.flatnonzero(live == widget.links.current)[0])
    assert np.any(review.correct == 0)
    assert review.correct[position] == 0
    widget.queue_panel.order_combo.setCurrentText("confidence")
    widget.links.queue.current = None  # (from the start of the queue)
    widget.links.next_link()
    position = int(np.flatnonzero(live == widget.links.current)[0])
    assert review.correct[position] == 1


def test_decisions_apply_to_a_clicked_point(viewer, tracked):
    widget = tracked
    review, links = widget.review, widget.links
    edits = review.edits
    track = int(edits.summary()["track_id"][np.argmax(edits.summary()["length"])])
    rows = edits.track_rows(track)
    review.select(track, int(rows[4]))  # as a click on that point does
    source = int(rows[3])
    assert links.target == rows[4] and widget.queue_panel.buttons["reject"].isEnabled()
    assert links.reject()
    assert (source, int(rows[4])) in edits.forbidden
    assert edits.predecessor_rows()[rows[4]] != source
