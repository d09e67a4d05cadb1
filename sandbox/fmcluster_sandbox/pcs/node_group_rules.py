"""What CreateComputeNodeGroup and UpdateComputeNodeGroup refuse before anything launches, each rule from AWS:

* instance types that EC2 has ("Creating a compute node group in AWS PCS"; DescribeInstanceTypes);
* ``securityGroupIds`` only when the launch template defines no network interfaces (CreateComputeNodeGroup,
  botocore PCS model);
* user data in MIME multi-part format ("Working with Amazon EC2 user data for AWS PCS");
* SPOT only with the EC2 Spot service-linked role ``AWSServiceRoleForEC2Spot`` in the account ("Amazon EC2
  Spot role for AWS PCS"; "Updating an AWS PCS compute node group");
* ``instanceHealthChecks``: not ``{}``, Slurm 26.05 or later, a deep health check profile other than NONE
  only on NVIDIA GPU types, no repair action with mode/profile NONE (CreateComputeNodeGroup, botocore model);
* Capacity Blocks ("Configure an AWS PCS compute node group to use a Capacity Block"): purchaseOption
  CAPACITY_BLOCK, a launch template with ``MarketType: capacity-block``, a CapacityReservationId and the
  block's instance type, the block scheduled or active, maxInstanceCount within the block's size;
  On-Demand Capacity Reservations ("Using ODCRs with PCS"): purchaseOption ONDEMAND and the reservation's
  instance type.
"""

from __future__ import annotations

import base64
import binascii
import email
from typing import Any

from fmcluster_sandbox import capacity_reservations, instance_catalog
from fmcluster_sandbox.pcs.errors import field_error

HEALTH_CHECKS_MIN_VERSION = (26, 5)
SPOT_ROLE_PATH = "/aws-service-role/spot.amazonaws.com/"


def template_data(ec2: Any, template: dict | None) -> dict[str, Any]:
    if not template:
        return {}
    return ec2.get_launch_template(template["id"]).get_version(template["version"]).data


def check_instance_types(spec: dict) -> list[dict[str, Any]]:
    facts = []
    for index, config in enumerate(spec["instanceConfigs"]):
        found = instance_catalog.instance_type(config["instanceType"])
        if found is None:
            raise field_error(f"instanceConfigs[{index}].instanceType",
                              f"{config['instanceType']} is not an EC2 instance type")
        facts.append(found)
    return facts


def check_interfaces_and_groups(spec: dict, data: dict[str, Any]) -> None:
    if data.get("NetworkInterfaces") and spec.get("securityGroupIds"):
        raise field_error("securityGroupIds", "securityGroupIds can't be set when the custom launch template "
                                              "defines network interfaces; put the groups on the interfaces")


def check_user_data(data: dict[str, Any]) -> None:
    user_data = data.get("UserData")
    if not user_data:
        return
    try:
        text = base64.b64decode(str(user_data), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        text = ""
    message = email.message_from_string(text)
    if not (message.is_multipart() and message.get_content_type().startswith("multipart/")):
        raise field_error("customLaunchTemplate", "the launch template's user data must be in MIME multi-part "
                                                  "format for AWS PCS")


def check_spot_role(spec: dict, iam: Any) -> None:
    if spec.get("purchaseOption") != "SPOT":
        return
    if not any(role.path == SPOT_ROLE_PATH for role in iam.roles.values()):
        raise field_error("purchaseOption", "SPOT needs the EC2 Spot service-linked role AWSServiceRoleForEC2Spot "
                                            "in this account (aws iam create-service-linked-role "
                                            "--aws-service-name spot.amazonaws.com)")


def check_health_checks(spec: dict, slurm_version: str, facts: list[dict[str, Any]]) -> None:
    checks = spec.get("instanceHealthChecks")
    if checks is None:
        return
    if not checks:
        raise field_error("instanceHealthChecks", "instanceHealthChecks can't be an empty object")
    if tuple(int(p) for p in slurm_version.split(".")) < HEALTH_CHECKS_MIN_VERSION:
        raise field_error("instanceHealthChecks", f"instance health checks need Slurm 26.05 or later; the "
                                                  f"cluster runs {slurm_version}")
    monitoring = checks.get("healthMonitoring")
    if monitoring is not None and monitoring.get("mode") == "NONE" and monitoring.get("repairAction"):
        raise field_error("instanceHealthChecks.healthMonitoring.repairAction", "repairAction can't be set when "
                                                                                "mode is NONE")
    on_start = (checks.get("deepHealthChecks") or {}).get("onStart")
    if on_start is None:
        return
    if on_start.get("profile") == "NONE":
        if on_start.get("repairAction"):
            raise field_error("instanceHealthChecks.deepHealthChecks.onStart.repairAction",
                              "repairAction can't be set when profile is NONE")
        return
    if not all(instance_catalog.has_nvidia_gpus(f) for f in facts):
        names = ", ".join(f["InstanceType"] for f in facts if not instance_catalog.has_nvidia_gpus(f))
        raise field_error("instanceHealthChecks.deepHealthChecks.onStart.profile",
                          f"deep health check profile {on_start.get('profile')} needs instance types with NVIDIA "
                          f"GPUs; {names} has none")


def check_capacity(spec: dict, data: dict[str, Any], account: str, region: str) -> None:
    purchase = spec.get("purchaseOption", "ONDEMAND")
    market = (data.get("InstanceMarketOptions") or {}).get("MarketType")
    target = ((data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {})
    reservation_id = target.get("CapacityReservationId")
    types = [c["instanceType"] for c in spec["instanceConfigs"]]
    if purchase != "CAPACITY_BLOCK":
        if market == "capacity-block":
            raise field_error("purchaseOption", "the launch template's MarketType is capacity-block: set "
                                                "purchaseOption to CAPACITY_BLOCK")
        if reservation_id:
            _check_odcr(purchase, reservation_id, types, account, region)
        return
    if market != "capacity-block":
        raise field_error("customLaunchTemplate", "with purchaseOption CAPACITY_BLOCK the launch template's "
                                                  "InstanceMarketOptions.MarketType must be capacity-block")
    if not reservation_id:
        raise field_error("customLaunchTemplate", "with purchaseOption CAPACITY_BLOCK the launch template needs a "
                                                  "CapacityReservationSpecification with a CapacityReservationId")
    block = capacity_reservations.REGISTRY.get(reservation_id, account, region)
    if block is None or not block.is_capacity_block:
        raise field_error("customLaunchTemplate", f"{reservation_id} is not a Capacity Block in this account "
                                                  f"and Region")
    template_type = data.get("InstanceType")
    if template_type != block.instance_type or any(t != block.instance_type for t in types):
        raise field_error("customLaunchTemplate", f"Capacity Block {reservation_id} is for {block.instance_type}; "
                                                  f"the launch template's InstanceType is {template_type} and the "
                                                  f"node group's instance types are {', '.join(types)}")
    if block.state not in ("scheduled", "active"):
        raise field_error("customLaunchTemplate", f"Capacity Block {reservation_id} is {block.state}; it must be "
                                                  "scheduled or active")
    high = spec["scalingConfiguration"]["maxInstanceCount"]
    if high > block.total:
        raise field_error("scalingConfiguration.maxInstanceCount", f"maxInstanceCount {high} exceeds the size of "
                                                                   f"Capacity Block {reservation_id} ({block.total})")


def _check_odcr(purchase: str, reservation_id: str, types: list[str], account: str, region: str) -> None:
    reservation = capacity_reservations.REGISTRY.get(reservation_id, account, region)
    if reservation is None:
        raise field_error("customLaunchTemplate", f"capacity reservation {reservation_id} does not exist")
    if reservation.is_capacity_block:
        raise field_error("purchaseOption", f"{reservation_id} is a Capacity Block: set purchaseOption to "
                                            "CAPACITY_BLOCK")
    if purchase != "ONDEMAND":
        raise field_error("purchaseOption", "On-Demand Capacity Reservations need purchaseOption ONDEMAND")
    if any(t != reservation.instance_type for t in types):
        raise field_error("instanceConfigs", f"capacity reservation {reservation_id} is for "
                                             f"{reservation.instance_type}, not {', '.join(types)}")
