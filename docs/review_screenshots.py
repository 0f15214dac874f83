"""The two screenshots of docs/review.md (the README's review tutorial), taken in napari on the bundled sample.

Run headless (the images are written to docs/images/):

    xvfb-run -a -s "-screen 0 1600x1000x24" python docs/review_screenshots.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

IMAGES = Path(__file__).resolve().parent / "images"
WIDTH = 1100
"""Pixels across of the saved images (the window is scaled down; 256 colours keep the files small)."""


def save(image: np.ndarray, path: Path) -> None:
    from PIL import Image

    picture = Image.fromarray(np.asarray(image)[..., :3])
    picture = picture.resize((WIDTH, round(picture.height * WIDTH / picture.width)), Image.LANCZOS)
    picture.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"{path} ({path.stat().st_size // 1024} KiB)")


def main() -> None:
    import napari
    from qtpy.QtWidgets import QApplication

    IMAGES.mkdir(exist_ok=True)
    viewer = napari.Viewer(show=True)
    viewer.window._qt_window.resize(1600, 1000)
    app = QApplication.instance()
    _, widget = viewer.window.add_plugin_dock_widget("tracker3d", "Particle tracker")
    viewer.open_sample("tracker3d", "sample")
    widget.track_panel.detection.set_values({"device": "cpu"})
    widget.run()
    while widget.running:
        app.processEvents()
    widget.track_panel.setChecked(False) if widget.track_panel.isCheckable() else widget.track_panel.hide()
    links = widget.links
    widget.review_panel.colour_combo.setCurrentText("link confidence")
    links.next_link()
    app.processEvents()
    save(viewer.screenshot(canvas_only=False, flash=False), IMAGES / "review_queue.png")

    links.accept()
    links.accept()
    links.reject()
    review = widget.review
    summary = review.edits.summary()
    track = int(summary["track_id"][np.argmax(summary["length"])])
    review.jump_to(track)
    viewer.scene.camera.zoom *= 0.4  # (the track among its neighbours)
    widget.queue_panel.setChecked(False)
    widget.analysis_panel.set_filters(min_length=5)
    app.processEvents()
    save(viewer.screenshot(canvas_only=False, flash=False), IMAGES / "review_analysis.png")
    viewer.close()


if __name__ == "__main__":
    main()
