"""The sandbox refuses what AWS and Kubernetes refuse in the areas added last (issue 35, part 6), driven over HTTP
with plain boto3 and urllib. Each test quotes the page its expected values come from; the values are typed here from
those pages, never read from the sandbox's code."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest
from fixtures.kube import daemonset
from fixtures.sandbox_eks import ASSUME_EC2, REGION  # the Region World works in


def _ec2_code(call) -> str:
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as info:
        call()
    return info.value.response["Error"]["Code"]


def test_capacity_blocks_cannot_be_modified_or_cancelled_and_odcrs_only_in_their_states(sandbox):
    """EC2 API CancelCapacityReservation and EC2 guide "Cancel a Capacity Reservation": "You can't modify or cancel a
    Capacity Block"; an ODCR is cancelled while "assessing" or "active". "View Capacity Blocks": "Before a Capacity
    Block reservation begins, the available capacity appears as zero. You can see how many instances will be
    available in your Capacity Block by the tag value for the tag key
    aws:ec2capacityreservation:incrementalRequestedQuantity".
    "Modify an active Capacity Reservation": "expired, cancelled, unsupported, or failed state — You can't modify the
    Capacity Reservation in any way"; "To change the instance eligibility, the Capacity Reservation must be completely
    idle (zero usage)"."""
    ec2 = sandbox.client("ec2", "us-east-1")
    now = dt.datetime.now(dt.timezone.utc)
    for start, end in ((now - dt.timedelta(hours=1), now + dt.timedelta(days=1)),  # active
                       (now + dt.timedelta(days=2), now + dt.timedelta(days=3))):  # scheduled
        block = sandbox.control("POST", "/_fmcluster/capacity-reservations", {
            "instance_type": "p5.48xlarge", "availability_zone": "us-east-1a", "count": 2, "type": "capacity-block",
            "start": start.isoformat(), "end": end.isoformat()})["reservation_id"]
        assert _ec2_code(lambda b=block: ec2.cancel_capacity_reservation(CapacityReservationId=b)) == \
            "UnsupportedOperation"
        assert _ec2_code(lambda b=block: ec2.modify_capacity_reservation(CapacityReservationId=b, InstanceCount=1)) \
            == "UnsupportedOperation"
        (held,) = ec2.describe_capacity_reservations(CapacityReservationIds=[block])["CapacityReservations"]
        assert held["State"] in ("active", "scheduled") and held["TotalInstanceCount"] == 2
        if held["State"] == "scheduled":  # "View Capacity Blocks": zero available before it begins, its size in a tag
            tags = {t["Key"]: t["Value"] for t in held.get("Tags") or []}
            assert (held["AvailableInstanceCount"], tags.get(
                "aws:ec2capacityreservation:incrementalRequestedQuantity")) == (0, "2")
        else:
            assert held["AvailableInstanceCount"] == 2

    odcr = ec2.create_capacity_reservation(InstanceType="m5.large", InstancePlatform="Linux/UNIX",
                                           AvailabilityZone="us-east-1a", InstanceCount=2)["CapacityReservation"]
    rid = odcr["CapacityReservationId"]
    assert ec2.modify_capacity_reservation(CapacityReservationId=rid, InstanceCount=3)["Return"] is True
    (changed,) = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    assert changed["TotalInstanceCount"] == 3
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    assert _ec2_code(lambda: ec2.cancel_capacity_reservation(CapacityReservationId=rid)) == "IncorrectState"
    assert _ec2_code(lambda: ec2.modify_capacity_reservation(CapacityReservationId=rid, InstanceCount=1)) == \
        "IncorrectState"

    busy = sandbox.control("POST", "/_fmcluster/capacity-reservations", {
        "instance_type": "m5.large", "availability_zone": "us-east-1a", "count": 2, "available": 1})["reservation_id"]
    assert _ec2_code(lambda: ec2.modify_capacity_reservation(CapacityReservationId=busy,
                                                             InstanceMatchCriteria="targeted")) == "IncorrectState"
    ec2.cancel_capacity_reservation(CapacityReservationId=busy)


def test_access_entry_types_principals_and_usernames(world):
    """CreateAccessEntry (botocore EKS model): "Valid values are STANDARD, FARGATE_LINUX, EC2_LINUX, EC2_WINDOWS, EC2,
    HYBRID_LINUX, and HYPERPOD_LINUX"; "For nodes (EC2, EC2_LINUX, EC2_WINDOWS, FARGATE_LINUX, and HYBRID_LINUX), the
    only valid ARN is IAM roles". EKS guide "Set a custom username for EKS access entries": "The username can't start
    with system:, eks:, aws:, amazon:, or iam:"."""
    cluster = world.cluster(accessConfig={"authenticationMode": "API"})
    user = world.iam.create_user(UserName=f"u-{uuid.uuid4().hex[:8]}")["User"]["Arn"]
    role = world.iam.create_role(RoleName=f"r-{uuid.uuid4().hex[:8]}",
                                 AssumeRolePolicyDocument=ASSUME_EC2)["Role"]["Arn"]
    create = world.eks.create_access_entry
    assert world.code(lambda: create(clusterName=cluster, principalArn=role, type="LINUX")) == \
        "InvalidParameterException"
    for kind in ("EC2_LINUX", "EC2_WINDOWS", "EC2", "FARGATE_LINUX", "HYBRID_LINUX"):
        assert world.code(lambda k=kind: create(clusterName=cluster, principalArn=user, type=k)) == \
            "InvalidParameterException", kind
    for prefix in ("system:", "eks:", "aws:", "amazon:", "iam:"):
        assert world.code(lambda p=prefix: create(clusterName=cluster, principalArn=user, username=p + "admin")) == \
            "InvalidParameterException", prefix
    assert create(clusterName=cluster, principalArn=user, username="team-admin")["accessEntry"]["username"] == \
        "team-admin"
    assert create(clusterName=cluster, principalArn=role, type="EC2_LINUX")["accessEntry"]["type"] == "EC2_LINUX"
    world.eks.delete_cluster(name=cluster)


def test_node_group_versions_never_go_backwards(world):
    """EKS API UpdateNodegroupVersion: "You cannot roll back a node group to an earlier Kubernetes version or AMI
    version"; the version is at most the cluster's ("Update a managed node group for your cluster")."""
    cluster = world.cluster(version="1.35")
    group = world.nodegroup(cluster, size=0, nodegroupName="workers")["nodegroupName"]
    world.eks.update_cluster_version(name=cluster, version="1.36")
    world.eks.describe_cluster(name=cluster)
    assert world.code(lambda: world.eks.update_nodegroup_version(clusterName=cluster, nodegroupName=group,
                                                                 version="1.34")) == "InvalidParameterException"
    world.eks.update_nodegroup_version(clusterName=cluster, nodegroupName=group, version="1.36")
    assert world.eks.describe_nodegroup(clusterName=cluster, nodegroupName=group)["nodegroup"]["version"] == "1.36"
    assert world.code(lambda: world.eks.update_nodegroup_version(clusterName=cluster, nodegroupName=group,
                                                                 version="1.35")) == "InvalidParameterException"
    world.eks.delete_nodegroup(clusterName=cluster, nodegroupName=group)


def test_eks_quotas_are_enforced_at_the_call(world, sandbox):
    """"Amazon EKS service quotas" (AWS General Reference "Amazon EKS endpoints and quotas"): L-6D54EA21 Managed node
    groups per cluster, L-BD136A63 Nodes per managed node group; CreateNodegroup's errors include
    ResourceLimitExceededException, "You have encountered a service limit on the specified resource"."""
    sandbox.quotas({"region": REGION, "service_code": "eks", "L-6D54EA21": 1, "L-BD136A63": 3})
    cluster = world.cluster()
    assert world.code(lambda: world.nodegroup(cluster, size=0, scalingConfig={
        "minSize": 0, "maxSize": 4, "desiredSize": 0})) == "ResourceLimitExceededException"
    group = world.nodegroup(cluster, size=0, scalingConfig={"minSize": 0, "maxSize": 3, "desiredSize": 0})
    assert world.code(lambda: world.nodegroup(cluster, size=0)) == "ResourceLimitExceededException"
    assert world.code(lambda: world.eks.update_nodegroup_config(
        clusterName=cluster, nodegroupName=group["nodegroupName"], scalingConfig={"maxSize": 4})) == \
        "ResourceLimitExceededException"
    sandbox.quotas({"region": REGION, "service_code": "eks", "reset": True})
    assert world.nodegroup(cluster, size=0)["status"] in ("CREATING", "ACTIVE")


# "Understand the Kubernetes version lifecycle on EKS", Amazon EKS Kubernetes release calendar (end of standard
# support, end of extended support; UTC); 1.35 and 1.36 carry no dates in the stored page.
CALENDAR = {"1.31": (dt.date(2025, 11, 26), dt.date(2026, 11, 26)),
            "1.32": (dt.date(2026, 3, 23), dt.date(2027, 3, 23)),
            "1.33": (dt.date(2026, 7, 29), dt.date(2027, 7, 29)),
            "1.34": (dt.date(2026, 12, 2), dt.date(2027, 12, 2))}


def _support(version: str, today: dt.date) -> str | None:
    end_standard, end_extended = CALENDAR.get(version, (None, None))
    if end_extended and today >= end_extended:
        return None
    return "EXTENDED_SUPPORT" if end_standard and today >= end_standard else "STANDARD_SUPPORT"


def test_eks_creates_clusters_only_at_versions_in_standard_or_extended_support(world):
    """Same page: "You can create new Amazon EKS clusters on any version offered in standard or extended support";
    "On the end of extended support date, you can no longer create new Amazon EKS clusters with the unsupported
    version". The sandbox's clock is the machine's (2026-12-06 when written: 1.31 is gone, 1.32 to 1.34 are on
    extended support)."""
    today = dt.datetime.now(dt.timezone.utc).date()
    listed = {v["clusterVersion"]: v for v in world.eks.describe_cluster_versions()["clusterVersions"]}
    for version in ("1.31", "1.32", "1.33", "1.34", "1.35", "1.36"):
        expected = _support(version, today)
        assert (listed[version]["versionStatus"] if version in listed else None) == expected, version
    assert world.code(lambda: world.cluster(version="1.31")) == "InvalidParameterException"
    if today < CALENDAR["1.32"][1]:
        name = world.cluster(version="1.32")
        assert world.eks.describe_cluster(name=name)["cluster"]["version"] == "1.32"
        assert listed["1.32"]["endOfExtendedSupportDate"].astimezone(dt.timezone.utc).date() == CALENDAR["1.32"][1]
        extended = world.eks.describe_cluster_versions(versionStatus="EXTENDED_SUPPORT")["clusterVersions"]
        assert {v["clusterVersion"] for v in extended} == {v for v in CALENDAR if _support(v, today) ==
                                                           "EXTENDED_SUPPORT"}
        world.eks.delete_cluster(name=name)


def _phases(fsx, fs_id: str, seen: list[tuple[str, ...]]) -> dict:
    """Describe the file system until its last FILE_SYSTEM_UPDATE completes, noting each (update, optimization)
    status pair seen."""
    deadline = time.monotonic() + 30
    while True:
        (found,) = fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
        actions = found.get("AdministrativeActions") or []
        update = [a for a in actions if a["AdministrativeActionType"] == "FILE_SYSTEM_UPDATE"][-1]
        optimizing = [a["Status"] for a in actions if a["AdministrativeActionType"] == "STORAGE_OPTIMIZATION"]
        pair = (update["Status"], *optimizing[-1:])
        if not seen or seen[-1] != pair:
            seen.append(pair)
        if update["Status"] == "COMPLETED":
            return found
        assert time.monotonic() < deadline, actions
        time.sleep(0.03)


def test_fsx_update_file_system_goes_through_its_phases(sandbox):
    """FSx for Lustre guide "Monitoring storage capacity increases": Pending, In progress, "Updated; Optimizing –
    Amazon FSx has increased the file system's storage capacity. The storage optimization process is now
    rebalancing data", Completed. FSx API AdministrativeAction: "After the FILE_SYSTEM_UPDATE task to increase a
    file system's storage capacity has completed successfully, a STORAGE_OPTIMIZATION task starts ... When
    STORAGE_OPTIMIZATION has been completed successfully, the parent FILE_SYSTEM_UPDATE action status changes to
    COMPLETED"; UpdateFileSystem: no storage increase while one is in progress."""
    fsx, ec2 = sandbox.client("fsx", "us-east-1"), sandbox.client("ec2", "us-east-1")
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    fs_id = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet],
                                   LustreConfiguration={"DeploymentType": "PERSISTENT_2",
                                                        "PerUnitStorageThroughput": 125})["FileSystem"]["FileSystemId"]
    answer = fsx.update_file_system(FileSystemId=fs_id, StorageCapacity=2400)["FileSystem"]
    assert [a["Status"] for a in answer["AdministrativeActions"]] == ["PENDING"]
    seen: list[tuple[str, ...]] = []
    done = _phases(fsx, fs_id, seen)
    assert [pair[0] for pair in seen] == ["IN_PROGRESS", "UPDATED_OPTIMIZING", "COMPLETED"]
    assert seen[1:] == [("UPDATED_OPTIMIZING", "IN_PROGRESS"), ("COMPLETED", "COMPLETED")]
    assert done["StorageCapacity"] == 2400 and done["Lifecycle"] == "AVAILABLE"

    answer = fsx.update_file_system(FileSystemId=fs_id, LustreConfiguration={"PerUnitStorageThroughput": 250})
    seen = []
    _phases(fsx, fs_id, seen)
    assert [pair[0] for pair in seen] == ["IN_PROGRESS", "COMPLETED"]  # no storage optimization for throughput


def test_a_storage_increase_blocks_updates_until_its_optimization_ends(sandbox):
    """UpdateFileSystem StorageCapacity: "You can't make a storage capacity increase request if there is an existing
    storage capacity increase request in progress": the request is in progress until COMPLETED, optimization
    included (the sandbox holds throughput changes to the same rule)."""
    fsx, ec2 = sandbox.client("fsx", "us-east-1"), sandbox.client("ec2", "us-east-1")
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    fs_id = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet],
                                   LustreConfiguration={"DeploymentType": "PERSISTENT_2",
                                                        "PerUnitStorageThroughput": 125})["FileSystem"]["FileSystemId"]
    fsx.update_file_system(FileSystemId=fs_id, StorageCapacity=2400)
    deadline = time.monotonic() + 30
    while True:
        (found,) = fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
        if found["AdministrativeActions"][0]["Status"] == "UPDATED_OPTIMIZING":
            break
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert _ec2_code(lambda: fsx.update_file_system(FileSystemId=fs_id,
                                                    LustreConfiguration={"PerUnitStorageThroughput": 250})) == \
        "BadRequest"


def test_force_and_field_manager_only_where_the_patch_type_takes_them(k8s):
    """apimachinery ``pkg/apis/meta/v1/validation`` ValidatePatchOptions: ``force`` "may not be specified for non-apply
    patch"; ``fieldManager`` "is required for apply patch"; ValidateFieldManager: at most 128 characters. 422 Invalid,
    ``PatchOptions.meta.k8s.io "" is invalid: ...``."""
    k8s.call("POST", "/api/v1/namespaces/default/configmaps",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})
    path = "/api/v1/namespaces/default/configmaps/c"
    for content_type in ("application/merge-patch+json", "application/json-patch+json",
                         "application/strategic-merge-patch+json"):
        body = ([{"op": "add", "path": "/data/b", "value": "2"}] if "json-patch" in content_type
                else {"data": {"b": "2"}})
        status, answer, _ = k8s.call("PATCH", path + "?force=true&fieldManager=me", body, content_type)
        assert (status, answer["message"]) == (422, 'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may '
                                                    'not be specified for non-apply patch'), content_type
    apply = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '3'}\n"
    status, answer, _ = k8s.call("PATCH", path + "?force=true", apply, "application/apply-patch+yaml")
    assert (status, answer["message"]) == (422, 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required '
                                                'value: is required for apply patch')
    status, answer, _ = k8s.call("PATCH", path + "?fieldManager=" + "m" * 129, apply, "application/apply-patch+yaml")
    assert status == 422 and "may not be more than 128" in answer["message"]
    status, answer, _ = k8s.call("PATCH", path + "?force=true&fieldManager=me", apply, "application/apply-patch+yaml")
    assert (status, answer["data"]["a"]) == (200, "3")


def test_env_value_and_value_from_are_mutually_exclusive(k8s):
    """kubernetes ``pkg/apis/core/validation`` validateEnvVarValueFrom; EnvVar API reference (``valueFrom``: "Cannot
    be used if value is not empty"): ``...env[0].valueFrom: Invalid value: "": may not be specified when `value` is
    not empty``; a ``valueFrom`` names one source."""
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets"
    source = {"fieldRef": {"fieldPath": "spec.nodeName"}}
    both = daemonset("both", "busybox", env=[{"name": "NODE", "value": "x", "valueFrom": source}])
    status, answer, _ = k8s.call("POST", path, both)
    assert status == 422
    assert answer["details"]["causes"] == [{
        "reason": "FieldValueInvalid", "field": "spec.template.spec.containers[0].env[0].valueFrom",
        "message": 'Invalid value: "": may not be specified when `value` is not empty'}]
    two = daemonset("two", "busybox", env=[{"name": "NODE", "valueFrom": {
        **source, "secretKeyRef": {"name": "s", "key": "k"}}}])
    assert k8s.call("POST", path, two)[0] == 422
    assert k8s.call("POST", path, daemonset("one", "busybox", env=[{"name": "NODE", "valueFrom": source}]))[0] == 201


def test_a_pod_volume_names_exactly_one_source(k8s):
    """kubernetes ``pkg/apis/core/validation`` validateVolumeSource: "may not specify more than 1 volume type" (422
    Forbidden); Volume API reference ("Volume represents a named volume in a pod": one VolumeSource)."""
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets"
    two = daemonset("two-sources", "busybox")
    two["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}, "hostPath": {"path": "/data"}}]
    status, answer, _ = k8s.call("POST", path, two)
    assert status == 422 and answer["details"]["causes"][0]["message"] == \
        "Forbidden: may not specify more than 1 volume type"
    one = daemonset("one-source", "busybox")
    one["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "hostPath": {"path": "/data"}}]
    assert k8s.call("POST", path, one)[0] == 201
