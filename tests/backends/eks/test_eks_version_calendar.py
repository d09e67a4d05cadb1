"""fmcluster's EKS version support follows the date, by the release calendar of the EKS User Guide's "Understand the
Kubernetes version lifecycle on EKS" (dates typed here from that page: 1.32 standard support to 2026-03-23 and
extended to 2027-03-23; 1.34 standard to 2026-12-02 and extended to 2027-12-02). The sandbox follows the same calendar
(test_sandbox_fidelity_day2.py), so a spec at 1.34 is now warned about extended support, as AWS would bill it."""

from __future__ import annotations

import datetime as dt

from fmcluster.catalog import eks_versions


def test_support_follows_the_release_calendar() -> None:
    before, after = dt.date(2026, 12, 1), dt.date(2026, 12, 6)
    assert eks_versions.support("1.34", before) == "standard"
    assert eks_versions.support("1.34", after) == "extended"
    assert eks_versions.control_plane_usd_per_hour("1.34") == (0.60 if dt.date.today() >= dt.date(2026, 12, 2)
                                                              else 0.10)
    assert eks_versions.support("1.32", dt.date(2027, 3, 22)) == "extended"
    assert eks_versions.support("1.32", dt.date(2027, 3, 23)) is None  # "you can no longer create new ... clusters"
    assert eks_versions.offered(dt.date(2027, 3, 23))[0] == "1.33"
    assert eks_versions.support("1.36", after) == "standard"
    assert eks_versions.support("1.31", after) is None
