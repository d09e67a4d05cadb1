"""The AWS requests the sandbox answers itself rather than moto: PCS, EKS, the guard's services, and the EC2,
Resource Groups and FSx actions moto lacks or serves unchecked (see :mod:`fmcluster_sandbox.server` for the list)."""

from __future__ import annotations

from typing import Any

from fmcluster_sandbox import protocols

FSX_TARGET_PREFIX = "AWSSimbaAPIService_v20180301."
PLACEMENT_GROUP_ACTIONS = ("CreatePlacementGroup", "DescribePlacementGroups", "DeletePlacementGroup")
CAPACITY_RESERVATION_ACTIONS = ("CreateCapacityReservation", "DescribeCapacityReservations",
                                "ModifyCapacityReservation", "CancelCapacityReservation")
LOCAL_ZONE_ACTIONS = ("DescribeAvailabilityZones", "ModifyAvailabilityZoneGroup")
FSX_BACKUP_OPERATIONS = ("CreateBackup", "DescribeBackups", "DeleteBackup")
FSX_DRA_OPERATIONS = ("CreateDataRepositoryAssociation", "DescribeDataRepositoryAssociations",
                      "DeleteDataRepositoryAssociation")


def answer(app: Any, environ: dict[str, Any], service: str, target: str, operation: str, params: dict[str, str],
           access_key: str | None, region: str) -> tuple[int, dict, bytes] | None:
    """The answer of a request the sandbox serves itself, or None for moto's (``app``: a
    :class:`fmcluster_sandbox.app.SandboxApp`)."""
    if service == "pcs":
        return app.pcs_answer(environ, operation, access_key, region)
    if service == "eks":
        return app.eks_answer(environ, access_key, region)
    if service in ("scheduler", "budgets", "ce"):
        from fmcluster_sandbox import guard_services

        return guard_services.answer(app.cost_tags, environ, service, target, operation, region,
                                     app.account(environ, access_key))
    if service == "ec2" and operation in PLACEMENT_GROUP_ACTIONS:
        return app.placement_groups.handle(operation, params, region, app.account(environ, access_key))
    if service == "ec2" and operation in CAPACITY_RESERVATION_ACTIONS:
        return app.capacity_reservations.handle(operation, params, region, app.account(environ, access_key))
    if service == "resource-groups":  # moto 5.2.5 routes only part of it: see fmcluster_sandbox.resource_groups
        return app.resource_groups.handle(environ, region, app.account(environ, access_key))
    if service == "ec2" and operation == "DescribeCapacityBlockOfferings":
        from fmcluster_sandbox import capacity_blocks

        return capacity_blocks.handle(params, region)
    if service == "ec2" and operation == "PurchaseCapacityBlock":
        from fmcluster_sandbox import capacity_blocks

        return capacity_blocks.purchase(params, region, app.account(environ, access_key))
    if service == "ec2" and operation == "DescribeCapacityBlockStatus":
        from fmcluster_sandbox import capacity_block_status

        return capacity_block_status.describe_status(params, region, app.account(environ, access_key),
                                                     app.faults)
    if service == "ec2" and operation == "DescribeCapacityBlocks":
        from fmcluster_sandbox import capacity_block_status

        return capacity_block_status.describe_blocks(params, region, app.account(environ, access_key))
    if service == "ec2" and operation in ("DescribeCapacityBlockExtensionOfferings",
                                          "PurchaseCapacityBlockExtension"):
        from fmcluster_sandbox import capacity_block_extensions

        serve = (capacity_block_extensions.describe if operation.startswith("Describe")
                 else capacity_block_extensions.purchase)
        return serve(params, region, app.account(environ, access_key))
    if service == "ec2" and operation in ("DescribeInstanceTopology", "DescribeCapacityReservationTopology"):
        from fmcluster_sandbox import topology_api

        return topology_api.handle(operation, params, region, app.account(environ, access_key), app.faults)
    if service == "ec2" and operation in LOCAL_ZONE_ACTIONS:
        from fmcluster_sandbox import local_zones

        return local_zones.handle(operation, params, region, app.account(environ, access_key))
    if target.startswith(FSX_TARGET_PREFIX) and operation in FSX_DRA_OPERATIONS:
        return app.data_repositories.handle(operation, protocols.read_body(environ), region,
                                             app.account(environ, access_key))
    if target.startswith(FSX_TARGET_PREFIX) and operation == "UpdateFileSystem":  # moto has no UpdateFileSystem
        from fmcluster_sandbox.fsx_extras import update_file_system

        return update_file_system(protocols.read_body(environ), region, app.account(environ, access_key))
    if target.startswith(FSX_TARGET_PREFIX) and operation in FSX_BACKUP_OPERATIONS:  # moto serves them unchecked
        from fmcluster_sandbox.fsx_extras import check_request

        return check_request(operation, protocols.read_body(environ))  # None: moto answers
    if target.startswith(FSX_TARGET_PREFIX) and operation == "DescribeVolumes":  # moto has no FSx volumes
        from fmcluster_sandbox.fsx_extras import describe_volumes

        return describe_volumes(protocols.read_body(environ), region, app.account(environ, access_key))
    return None
