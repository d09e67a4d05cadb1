"""Which clusters use a Capacity Block (``capacity list``'s ``clusters``): read from the block's own tag and from the
launch templates that name its reservation, fmcluster's by ``fmcluster:cluster`` and those a backend's own stack
makes by that backend's tag (``BackendProfile.cluster_name_tag``, handed in by the caller)."""

from __future__ import annotations

from typing import Any

from fmcluster.aws.capacity_blocks import clusters_by_reservation
from fmcluster.backends import registry

BACKEND_TAGS = [p.cluster_name_tag for p in registry.profiles() if p.cluster_name_tag]


class _Ec2:
    """Launch templates and their latest versions, as EC2's DescribeLaunchTemplates(Versions) answer."""

    def __init__(self, templates: dict[str, tuple[dict[str, str], str]]) -> None:
        self.templates = templates  # id -> (tags, reservation id)

    def get_paginator(self, operation: str) -> Any:
        assert operation == "describe_launch_templates"
        pages = [{"LaunchTemplates": [{"LaunchTemplateId": ident, "Tags": [{"Key": k, "Value": v}
                                                                              for k, v in tags.items()]}
                                      for ident, (tags, _) in self.templates.items()]}]
        return type("Paginator", (), {"paginate": lambda _self, **_: pages})()

    def describe_launch_template_versions(self, LaunchTemplateId: str, Versions: list[str]) -> dict[str, Any]:
        reservation = self.templates[LaunchTemplateId][1]
        target = {"CapacityReservationTarget": {"CapacityReservationId": reservation}}
        return {"LaunchTemplateVersions": [{"LaunchTemplateData": {"CapacityReservationSpecification": target}}]}


def test_a_block_s_users_are_named_by_fmcluster_s_tag_first_then_by_each_backend_s_own():
    assert BACKEND_TAGS == ["parallelcluster:cluster-name"]
    ec2 = _Ec2({"lt-1": ({"fmcluster:cluster": "pcs-one"}, "cr-1"),
                "lt-2": ({"parallelcluster:cluster-name": "pc-two"}, "cr-1"),
                "lt-3": ({"fmcluster:cluster": "both", "parallelcluster:cluster-name": "stack-name"}, "cr-2"),
                "lt-4": ({"Name": "someone-else"}, "cr-2")})
    assert clusters_by_reservation(ec2, ("fmcluster:cluster", *BACKEND_TAGS)) == \
        {"cr-1": {"pcs-one", "pc-two"}, "cr-2": {"both"}}
    # without the backends' tags only fmcluster's own templates are read
    assert clusters_by_reservation(ec2) == {"cr-1": {"pcs-one"}, "cr-2": {"both"}}
