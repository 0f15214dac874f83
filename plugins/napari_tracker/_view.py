"""Where the viewer looks: the camera, picking a track point under a click, fitting the view to a track.

Plain functions over a napari viewer and a :class:`~napari_tracker._edits.TrackEdits`;
positions are world coordinates ``(t, z, y, x)`` with z, y, x in µm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._edits import TrackEdits

PICK_TOLERANCE_PX = 10.0
"""How far (screen pixels) a click may land from a track point and still pick it."""

JUMP_CONTEXT = 0.25
"""Jumping to a track zooms in no further than to show this fraction of the whole scene (the track's
surroundings stay in view for a short track)."""


FIT_SHARE = 0.95
"""The share of the canvas a fitted view fills (napari's ``fit_to_view`` margin)."""


def camera(viewer) -> Any:
    """The viewer's camera (``viewer.scene.camera`` from napari 0.7, ``viewer.camera`` before)."""
    scene = getattr(viewer, "scene", None)
    return scene.camera if scene is not None and hasattr(scene, "camera") else viewer.camera


def current_frame(viewer) -> int:
    """The frame (time index) the viewer shows."""
    return int(round(float(viewer.dims.point[0])))


def pick_row(
    edits: TrackEdits,
    position: Any,
    frame: int,
    tolerance_um: float,
    tail_length: int,
    dims_displayed: list[int],
    view_direction: Any = None,
) -> int | None:
    """Row of the live track point nearest to a click at world ``position``, or None.

    Parameters
    ----------
    edits : TrackEdits
    position : (4,) floats
        The click in world coordinates ``t, z, y, x``.
    frame : int
        The frame shown; its points come first, then the visible tails (``tail_length`` frames back).
    tolerance_um : float
        Largest distance (µm, in the displayed plane or to the view ray) that still picks.
    dims_displayed : list of int
        The displayed dimensions (1..3 are z, y, x).
    view_direction : (4,) floats, optional
        In 3D, distances are measured to the ray along this direction.
    """
    rows = edits.rows()
    dims = [d for d in dims_displayed if d >= 1]
    if len(rows) == 0 or not dims:
        return None
    position = np.asarray(position, dtype=np.float64)
    frames = edits.column("frame")[rows]
    xyz = np.column_stack([edits.column(c)[rows] for c in ("z", "y", "x")])
    offset = xyz[:, [d - 1 for d in dims]] - position[dims]
    if view_direction is not None and len(dims) == 3:
        direction = np.asarray(view_direction, dtype=np.float64)[dims]
        norm = np.linalg.norm(direction)
        if norm > 0:
            direction = direction / norm
            offset = offset - np.outer(offset @ direction, direction)
    distance = np.linalg.norm(offset, axis=1)
    for candidates in (frames == frame, (frames <= frame) & (frames >= frame - tail_length)):
        index = np.flatnonzero(candidates & (distance <= tolerance_um))
        if len(index):
            return int(rows[index[np.argmin(distance[index])]])
    return None


def pick_tolerance_um(viewer) -> float:
    """:data:`PICK_TOLERANCE_PX` in world units at the current zoom."""
    return PICK_TOLERANCE_PX / max(float(camera(viewer).zoom), 1e-12)


def zoom_to(viewer, centre_zyx: Any, extent_um: float, whole_um: float | None = None) -> None:
    """Centre the view on ``centre_zyx`` (µm) and zoom to show ``extent_um`` across.

    Shows at least :data:`JUMP_CONTEXT` of the whole scene (``whole_um`` across; measured on the layers when
    not given, which makes napari measure every layer: some 30 ms for 100k track points); leaves the 3D camera
    angles as they are.
    """
    size = getattr(getattr(viewer, "canvas", None), "size", None)
    if whole_um is not None and size is not None and min(size) > 0:
        view = camera(viewer)
        view.center = tuple(float(v) for v in centre_zyx)
        view.zoom = FIT_SHARE * float(min(size)) / max(float(extent_um), JUMP_CONTEXT * float(whole_um), 1e-9)
        return
    displayed = list(viewer.dims.displayed)
    viewer.fit_to_view()  # the zoom that shows the whole scene
    whole = float(np.ptp(np.asarray(viewer.layers.extent.world)[:, displayed], axis=0).max())
    view = camera(viewer)
    view.center = tuple(float(v) for v in centre_zyx)
    if whole > 0:
        view.zoom = view.zoom * whole / max(float(extent_um), JUMP_CONTEXT * whole)


def set_point_once(viewer, axes: tuple[int, ...], values: tuple[float, ...]) -> None:
    """``viewer.dims.set_point(axes, values)``, slicing the layers once instead of twice.

    napari slices every layer on the ``point`` event and again on the ``current_step`` event that follows it
    (each slicing measures every layer: some 15 ms for 100k track points). The first is skipped where the step
    changes too (the second slices at the new point); where only the point moved within its step, the layers
    are sliced once after.
    """
    dims = viewer.dims
    # (the viewer model's slicing, napari 0.4 to 0.9; through the model itself: napari hands plugins a proxy
    # that warns on private names)
    update = getattr(getattr(viewer, "__wrapped__", viewer), "_update_layers", None)
    if update is None:
        dims.set_point(axes, values)
        return
    step, point = dims.current_step, dims.point
    with dims.events.point.blocker(update):
        dims.set_point(axes, values)
    if dims.current_step == step and dims.point != point:
        update()


def show_point(viewer, edits: TrackEdits, row: int, tail_length: int) -> None:
    """Go to the frame (and in 2D the plane) of point ``row``, centred on it and zoomed on its track's
    path within ``tail_length`` frames."""
    t = int(edits.column("frame")[row])
    zyx = [float(edits.column(c)[row]) for c in ("z", "y", "x")]
    if viewer.dims.ndisplay == 2 and viewer.dims.ndim >= 4:
        set_point_once(viewer, (0, 1), (t, zyx[0]))
    else:
        set_point_once(viewer, (0,), (t,))
    rows = edits.track_rows(int(edits.column("track_id")[row]))
    near = rows[np.abs(edits.column("frame")[rows] - t) <= tail_length]
    displayed = [d - 1 for d in viewer.dims.displayed if d >= 1]
    xyz = np.column_stack([edits.column(c)[near] for c in ("z", "y", "x")])[:, displayed]
    zoom_to(viewer, zyx, 2.0 * float(np.ptp(xyz, axis=0).max()))


def click_callback(on_click: Callable[[Any, Any], None]) -> Callable:
    """A napari mouse-drag callback that calls ``on_click(viewer, event)`` on a left click and lets drags
    (pan, rotate: the pointer moved more than 4 screen pixels) through."""

    def callback(viewer, event):
        if event.type != "mouse_press" or event.button != 1:
            return
        start = np.asarray(event.pos, dtype=float)
        moved = False
        yield
        while event.type == "mouse_move":
            moved = moved or np.linalg.norm(np.asarray(event.pos, dtype=float) - start) > 4
            yield
        if not moved:
            on_click(viewer, event)

    return callback
