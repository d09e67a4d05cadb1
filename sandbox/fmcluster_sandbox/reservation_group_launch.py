"""RunInstances into a Capacity Reservation group, as the EC2 user guide describes it.

"Instances that target a group of Capacity Reservations match with any Capacity Reservation in the group that
has matching attributes (instance type, platform, Availability Zone, and tenancy) and available capacity. If
the group does not have a Capacity Reservation with matching attributes and available capacity, the instances
run using On-Demand capacity." (EC2 user guide, "Capacity Reservation groups"; the same for canceled or used-up
reservations in "Instance lifecycle in a group".) So a launch whose ``CapacityReservationTarget`` names a
``CapacityReservationResourceGroupArn`` is never refused for want of reserved capacity here: each instance takes
a free slot of a matching, active On-Demand Capacity Reservation of the group (counted in
:mod:`fmcluster_sandbox.capacity_reservations` until it terminates), and the rest run On-Demand.

This wraps the launch rules of :mod:`fmcluster_sandbox.ec2_launch` from outside (it is installed after them), so
those rules stay as they are.
"""

from __future__ import annotations

import threading
from typing import Any

from fmcluster_sandbox import capacity_reservations, ec2_launch, resource_groups

_lock = threading.Lock()  # one group launch at a time picks and claims its slots


def group_target(backend: Any, kwargs: dict[str, Any]) -> str | None:
    """The group ARN a launch targets: the request's CapacityReservationSpecification over its template's."""
    extras = getattr(ec2_launch._request, "extras", None) or {}
    spec = extras.get("CapacityReservationSpecification") or {}
    if not spec and kwargs.get("launch_template"):
        try:
            spec = backend._get_template_from_args(kwargs["launch_template"]).data.get(
                "CapacityReservationSpecification") or {}
        except Exception:  # an unknown template: the launch itself reports it
            return None
    return (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationResourceGroupArn") or None


def slots(group_arn: str, launch: ec2_launch.Launch) -> list[tuple[capacity_reservations.Reservation, int]]:
    """Which of the group's reservations take how many of the launch's instances (the rest run On-Demand)."""
    ids = resource_groups.REGISTRY.reservation_ids(group_arn, launch.account, launch.region) or []
    wanted, plan = launch.count, []
    for rid in ids:
        reservation = capacity_reservations.REGISTRY.get(rid, launch.account, launch.region)
        if (wanted <= 0 or reservation is None or reservation.is_capacity_block
                or reservation.state != "active" or reservation.instance_type != launch.instance_type
                or reservation.tenancy != "default" or not launch.zone
                or reservation.availability_zone != launch.zone or reservation.available <= 0):
            continue
        taken = min(wanted, reservation.available)
        plan.append((reservation, taken))
        wanted -= taken
    return plan


_installed = False


def install() -> None:
    """Count group launches against the group's reservations (idempotent; after ``ec2_launch.install``)."""
    global _installed
    if _installed:
        return
    from moto.ec2.models.instances import InstanceBackend

    inner = InstanceBackend.run_instances

    def run_instances(self, image_id, count, user_data, security_group_names, **kwargs):
        group_arn = group_target(self, kwargs)
        if group_arn is None:
            return inner(self, image_id, count, user_data, security_group_names, **kwargs)
        saved = getattr(ec2_launch._request, "extras", None)
        launch = ec2_launch.Launch.resolve(self, int(count), kwargs)
        ec2_launch._request.extras = saved  # resolve() consumes them; the launch rules read them again
        with _lock:
            plan = slots(group_arn, launch)
            reservation = inner(self, image_id, count, user_data, security_group_names, **kwargs)
            ids = [instance.id for instance in reservation.instances]
            for held, taken in plan:
                capacity_reservations.REGISTRY.claim(held, ids[:taken])
                ids = ids[taken:]
        return reservation

    InstanceBackend.run_instances = run_instances
    _installed = True
