"""The Incidents page filters on every kind diagnosis reports: a divergence (issue 19) could
not be chosen, and a link with kind=divergence showed every kind instead."""

from __future__ import annotations

from app.diagnose.diagnosis import KIND_RANK
from tests.app.test_dashboard_pages import page, seed, seeded  # noqa: F401 (fixtures)


def test_every_kind_diagnosis_reports_can_be_chosen(seed):  # noqa: F811
    at = page("views/incidents.py", kind="divergence")
    chooser = at.multiselect(key="i-kind")
    assert set(chooser.options) == set(KIND_RANK)
    assert chooser.value == ["divergence"]
