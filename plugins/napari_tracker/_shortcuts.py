"""The review's keyboard shortcuts, bound on the viewer (none of them is a napari default)."""

from __future__ import annotations

from collections.abc import Callable

SHORTCUTS = {
    "delete": "Shift-D",
    "split": "Shift-S",
    "join": "Shift-J",
    "reassign": "Shift-R",
    "jump": "Shift-F",
    "undo": "Control-Z",
    "redo": "Control-Shift-Z",
    "next": "Shift-N",
    "previous": "Shift-P",
    "accept": "Shift-A",
    "reject": "Shift-X",
    "pin_track": "Shift-T",
}
"""Action name -> key binding."""


def bind_shortcuts(viewer, actions: dict[str, Callable[[], object]]) -> dict[str, Callable]:
    """Bind each action of ``actions`` (keys of :data:`SHORTCUTS`) on ``viewer``; returns key -> bound callable."""
    bound = {}
    for name, action in actions.items():
        bound[SHORTCUTS[name]] = (lambda act: lambda viewer: act())(action)
        viewer.bind_key(SHORTCUTS[name], bound[SHORTCUTS[name]], overwrite=True)
    return bound


def unbind_shortcuts(viewer, bound: dict[str, Callable]) -> None:
    """Undo :func:`bind_shortcuts`, leaving keys that something else has bound since."""
    from napari.utils.key_bindings import KeyBinding

    for key, callback in bound.items():
        if viewer.keymap.get(KeyBinding.from_str(key)) == callback:  # == sees through napari's proxies
            viewer.bind_key(key, None)
