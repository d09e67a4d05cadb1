"""EC2's answer to a RunInstances the sandbox's faults say has no capacity: ``InsufficientInstanceCapacity``
with AWS's own message, for the instance type asked for directly or through a launch template."""

from __future__ import annotations

from typing import Any

from fmcluster_sandbox import protocols


def _ec2_backend(region: str) -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    return ec2_backends[DEFAULT_ACCOUNT_ID][region]


def insufficient_capacity(faults: Any, params: dict[str, str], region: str) -> bytes | None:
    """The error body when ``faults`` take away the requested type's capacity; None otherwise."""
    wanted = set(faults.insufficient_capacity or ())
    itype = params.get("InstanceType") or _launch_template_type(params, region)
    if not itype or itype not in wanted:
        return None
    az = params.get("Placement.AvailabilityZone") or _subnet_az(params, region) or f"{region}a"
    return protocols.ec2_error_xml("InsufficientInstanceCapacity", (
        f"We currently do not have sufficient {itype} capacity in the Availability Zone you requested ({az}). "
        "Our system will be working on provisioning additional capacity. You can currently get "
        f"{itype} capacity by not specifying an Availability Zone in your request or choosing a different "
        "Availability Zone."))


def _subnet_az(params: dict[str, str], region: str) -> str | None:
    subnet = params.get("SubnetId") or params.get("NetworkInterface.1.SubnetId")
    try:
        return _ec2_backend(region).get_subnet(subnet).availability_zone if subnet else None
    except Exception:
        return None


def _launch_template_type(params: dict[str, str], region: str) -> str | None:
    lt_id = params.get("LaunchTemplate.LaunchTemplateId")
    lt_name = params.get("LaunchTemplate.LaunchTemplateName")
    if not (lt_id or lt_name):
        return None
    try:
        spec = {"LaunchTemplateId": lt_id} if lt_id else {"LaunchTemplateName": lt_name}
        spec["Version"] = params.get("LaunchTemplate.Version") or "$Default"
        return _ec2_backend(region)._get_template_from_args(spec).data.get("InstanceType")
    except Exception:
        return None
