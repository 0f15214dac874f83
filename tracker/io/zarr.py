"""Zarr and OME-Zarr time-lapses (Zarr v2 or v3), read lazily frame by frame.

An OME-Zarr (NGFF 0.4 / 0.5) image is a group whose ``multiscales[0]`` names its
axes (``t, c, z, y, x`` with units) and datasets; the first (full-resolution)
dataset is read, and its ``scale`` transformation (times the multiscale's own,
if any) gives the voxel size, converted to µm from the axes' units. A plain
Zarr array, or a group holding one array, is read with axes ``TZYX`` (4D) or
those given. Only the frame asked for is read from the store (one chunk row
along ``t``), so a stack larger than memory can be tracked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..stack import FrameArray, Stack, check_voxel_size
from .tiff import _normalise_axes, _short, channel_index

_UNIT_TO_UM = {"micrometer": 1.0, "micron": 1.0, "µm": 1.0, "um": 1.0, "nanometer": 1e-3, "nm": 1e-3,
               "millimeter": 1e3, "mm": 1e3, "centimeter": 1e4, "meter": 1e6, "angstrom": 1e-4}


def read_zarr(path: str | os.PathLike, voxel_size: Sequence[float] | None = None,
              axes: str | None = None, channel: int | None = None) -> Stack:
    """Open a Zarr or OME-Zarr time-lapse as a lazily read ``(T, Z, Y, X)`` :class:`Stack`.

    Parameters
    ----------
    path : path
        The ``.zarr`` folder: an OME-Zarr image group, a group holding one array, or an array.
    voxel_size : (z, y, x) floats, optional
        µm; overrides the OME metadata.
    axes : str, optional
        The array's axes (e.g. ``"TZYX"``, ``"TCZYX"``, ``"TYX"``, ``"ZYX"``), in any order; overrides the OME
        metadata.
    channel : int, optional
        The channel to track (0-based), when there are several.

    Raises
    ------
    InputError
        Not a Zarr store, a group of several arrays without OME metadata, several channels and no (or a
        wrong) ``channel``, axes
        that cannot be told apart without ``axes``, or a pixel type that is not numeric.
    """
    try:
        import zarr
    except ImportError:
        raise InputError("Zarr stacks need the zarr package: pip install 'tracker3d[formats]'") from None

    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    try:
        node = zarr.open(str(path), mode="r")
    except Exception as error:  # zarr raises several types for what is not a store
        raise InputError(f"{path}: not a readable Zarr store ({_short(error)})") from None
    notes: list[str] = []
    ome_axes, scale = None, None
    if isinstance(node, zarr.Array):
        array = node
    else:
        attributes = dict(node.attrs)
        multiscales = attributes.get("ome", attributes).get("multiscales")
        if multiscales:
            array, ome_axes, scale = _ome_image(path, node, multiscales[0])
        else:
            arrays = sorted(name for name, _ in node.arrays())
            if len(arrays) != 1:
                raise InputError(f"{path}: a Zarr group of {len(arrays)} arrays ({', '.join(arrays[:5])}) "
                                 "without OME metadata; give the array's folder")
            array = node[arrays[0]]
    shape = tuple(int(s) for s in array.shape)
    dtype = np.dtype(array.dtype)
    if dtype.kind not in "uif":
        raise InputError(f"{path}: unsupported pixel type {dtype}")
    file_axes = "".join(a["name"] if isinstance(a, Mapping) else a for a in ome_axes).upper() if ome_axes else None
    if axes is None and file_axes is None:
        file_axes = {4: "TZYX", 5: "TCZYX"}.get(len(shape), "Q" * len(shape))
    stack_axes = _normalise_axes(path, axes.upper() if axes else file_axes, shape, explicit=axes is not None)
    index = channel_index(path, dict(zip(stack_axes, shape)).get("C", 1), channel)
    if ome_axes is None and axes is None:
        notes.append(f"no axes in the Zarr metadata: read as {stack_axes}")
    core = stack_axes.replace("C", "")
    if "T" not in core:
        notes.append("single 3D volume: treated as one frame (nothing to link)")
    elif "Z" not in core:
        notes.append("2D time series: each frame is a volume of one plane (Z = 1)")
    voxel = _voxel_size(path, stack_axes, ome_axes, scale, voxel_size, notes)
    return Stack(_frames(array, stack_axes, shape, index), voxel, path, tuple(notes))


def _ome_image(path: Path, group: Any, multiscale: Mapping[str, Any]) -> tuple[Any, list, list | None]:
    """The full-resolution array of an OME multiscale image, its axes and its scale (per axis)."""
    try:
        dataset = multiscale["datasets"][0]
        array = group[dataset["path"]]
    except (KeyError, IndexError, TypeError) as error:
        raise InputError(f"{path}: OME-Zarr metadata without a readable first dataset ({_short(error)})") from None
    scale = None
    for transforms in (dataset.get("coordinateTransformations"), multiscale.get("coordinateTransformations")):
        for transform in transforms or []:
            if transform.get("type") == "scale":
                values = [float(v) for v in transform["scale"]]
                scale = values if scale is None else [a * b for a, b in zip(scale, values)]
    axes = multiscale.get("axes") or []
    if axes and len(axes) != len(array.shape):
        raise InputError(f"{path}: OME-Zarr axes {axes} do not match the array's shape {array.shape}")
    return array, axes, scale


def _voxel_size(path: Path, stack_axes: str, ome_axes: list | None, scale: list | None,
                given: Sequence[float] | None, notes: list[str]) -> tuple[float, float, float]:
    if given is not None:
        return check_voxel_size(given, 1 if "Z" not in stack_axes else None)
    if scale is None or ome_axes is None:
        notes.append("no voxel size in the Zarr metadata: using 1 µm (set --voxel-size Z,Y,X)")
        return (1.0, 1.0, 1.0)
    sizes = {}
    for letter, axis, value in zip(stack_axes, ome_axes, scale):
        unit = (axis.get("unit") if isinstance(axis, Mapping) else None) or "micrometer"
        if letter in "ZYX":
            factor = _UNIT_TO_UM.get(str(unit).lower())
            if factor is None:
                raise InputError(f"{path}: axis {letter.lower()} is in {unit!r}, not a length unit")
            sizes[letter] = value * factor
    if "Y" not in sizes or "X" not in sizes:
        return (1.0, 1.0, 1.0)
    return check_voxel_size((sizes.get("Z", sizes["X"]), sizes["Y"], sizes["X"]))


def _frames(array: Any, axes: str, shape: tuple[int, ...], channel: int) -> FrameArray:
    """A :class:`FrameArray` reading frame ``t`` of ``array`` (axes ``axes``, channel ``channel``) as a
    ``(Z, Y, X)`` volume."""
    sizes = dict(zip(axes, shape))
    kept = (sizes.get("T", 1), sizes.get("Z", 1), sizes["Y"], sizes["X"])
    spatial = [a for a in axes if a in "ZYX"]
    order = [spatial.index(a) for a in "ZYX" if a in spatial]

    def read_frame(t: int) -> np.ndarray:
        key = tuple(t if a == "T" else channel if a == "C" else slice(None) for a in axes)
        volume = np.transpose(np.asarray(array[key]), order)
        return volume.reshape(kept[1:])

    return FrameArray(kept, array.dtype, read_frame)
