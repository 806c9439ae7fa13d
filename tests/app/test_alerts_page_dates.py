"""The Alerts page reads a silence stored before durations were bounded (issue 18, finding
11): one ending in 1e23 Unix seconds made the page show OSError instead of its tables."""

from __future__ import annotations

import time

from tests.app.test_dashboard_pages import empty, page, texts  # noqa: F401 (a fixture)


def test_a_silence_ending_past_any_date_still_shows(empty):  # noqa: F811
    empty.db.run("alerts/api_silence_insert", {"rule": "*", "run": "*",
                                               "created_time": time.time(),
                                               "until_time": 1e23, "comment": "old"})
    at = page("views/alerts.py")
    assert not at.exception and not at.error, texts(at.error)
    shown = [frame.value for frame in at.dataframe]
    assert any("past any date" in str(frame.to_dict()) for frame in shown), shown
