"""LinkSummary: what the linker measured and decided, in one line."""

from __future__ import annotations

import dataclasses

import pytest

from tracker.linking import LinkSummary


def test_summary_line():
    summary = LinkSummary(persistence=0.7912, persistence_estimated=True, smoothing="look-ahead", exchanges=12,
                          missing_rate=0.0834, gap_closing=True)
    assert str(summary) == ("linking: persistence 0.79 (estimated), smoothing look-ahead (12 point exchanges), "
                            "8.3 % of points unlinked, gap closing on")
    given = dataclasses.replace(summary, persistence=0.5, persistence_estimated=False, smoothing="forward successor",
                                exchanges=0, missing_rate=0.0, gap_closing=False)
    assert str(given) == ("linking: persistence 0.50 (given), smoothing forward successor, 0.0 % of points unlinked, "
                          "gap closing off")
    brownian = LinkSummary(None, True, "off", 0, 0.0123, True)
    assert str(brownian) == "linking: no prediction, smoothing off, 1.2 % of points unlinked, gap closing on"


def test_summary_is_frozen():
    summary = LinkSummary(None, True, "off", 0, 0.0, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.exchanges = 3
