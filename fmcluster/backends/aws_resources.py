"""EC2, IAM and FSx resources that a cluster needs around the scheduler itself.

Each finds itself by name or tag before creating, so a re-run after a crash adopts what exists.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import Any

from botocore.exceptions import ClientError

from fmcluster.engine import Context, Observed, Resource
from fmcluster.render.documents import Document


def error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


def _ready(resource_id: str, outputs: dict[str, Any], status: str = "available") -> Observed:
    return Observed(resource_id, status, "ready", outputs)


class SecurityGroup(Resource):
    kind = "security_group"

    def __init__(self, document: Document, vpc_id: str):
        self.key = document.key
        self.document = document
        self.vpc_id = vpc_id
        self.group_name = document.body["create"]["GroupName"]

    def _outputs(self, group_id: str) -> dict[str, Any]:
        return {"security_group.id": group_id}

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        ec2 = ctx.client("ec2")
        filters = [{"Name": "group-name", "Values": [self.group_name]}, {"Name": "vpc-id", "Values": [self.vpc_id]}]
        groups = ec2.describe_security_groups(Filters=filters)["SecurityGroups"]
        if not groups:
            return None
        group_id = groups[0]["GroupId"]
        return _ready(group_id, self._outputs(group_id))

    def create(self, ctx: Context) -> Observed:
        ec2 = ctx.client("ec2")
        request = {**self.document.body["create"], "VpcId": self.vpc_id}
        group_id = ec2.create_security_group(**request)["GroupId"]
        ctx.publish(self._outputs(group_id))
        for section, call in (("ingress", ec2.authorize_security_group_ingress),
                              ("egress", ec2.authorize_security_group_egress)):
            try:
                call(**ctx.resolve(self.document.body[section]))
            except ClientError as exc:
                if error_code(exc) != "InvalidPermission.Duplicate":
                    raise
        return _ready(group_id, self._outputs(group_id))

    def delete(self, ctx: Context, observed: Observed) -> None:
        ec2 = ctx.client("ec2")
        # Network interfaces of terminating instances hold the group for a while after they are gone.
        for _ in range(60):
            try:
                ec2.delete_security_group(GroupId=observed.id)
                return
            except ClientError as exc:
                if error_code(exc) == "InvalidGroup.NotFound":
                    return
                if error_code(exc) != "DependencyViolation":
                    raise
                time.sleep(2)


class PlacementGroup(Resource):
    kind = "placement_group"

    def __init__(self, document: Document):
        self.key = document.key
        self.document = document
        self.group_name = document.body["GroupName"]

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        try:
            groups = ctx.client("ec2").describe_placement_groups(GroupNames=[self.group_name])["PlacementGroups"]
        except ClientError as exc:
            if error_code(exc) in ("InvalidPlacementGroup.Unknown", "InvalidGroup.NotFound"):
                return None
            raise
        groups = [g for g in groups if g.get("State") != "deleted"]
        if not groups:
            return None
        state = groups[0].get("State", "available")
        phase = "ready" if state == "available" else ("gone" if state == "deleting" else "pending")
        return Observed(groups[0].get("GroupId") or self.group_name, state, phase,
                        {f"placement_group.{self.key}.name": self.group_name})

    def create(self, ctx: Context) -> Observed:
        ctx.client("ec2").create_placement_group(**self.document.body)
        return Observed(self.group_name, "pending", "pending")

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("ec2").delete_placement_group(GroupName=self.group_name)
        except ClientError as exc:
            if error_code(exc) not in ("InvalidPlacementGroup.Unknown",):
                raise


class LaunchTemplate(Resource):
    kind = "launch_template"

    def __init__(self, document: Document, depends_on: tuple[str, ...]):
        self.key = document.key
        self.document = document
        self.depends_on = depends_on
        self.template_name = document.body["LaunchTemplateName"]

    def _outputs(self, template: dict[str, Any]) -> dict[str, Any]:
        return {f"launch_template.{self.key}.id": template["LaunchTemplateId"],
                f"launch_template.{self.key}.version": str(template["LatestVersionNumber"])}

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        try:
            found = ctx.client("ec2").describe_launch_templates(LaunchTemplateNames=[self.template_name])
        except ClientError as exc:
            if error_code(exc) in ("InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound"):
                return None
            raise
        templates = found["LaunchTemplates"]
        if not templates:
            return None
        return _ready(templates[0]["LaunchTemplateId"], self._outputs(templates[0]))

    def create(self, ctx: Context) -> Observed:
        template = ctx.client("ec2").create_launch_template(**ctx.resolve(self.document.body))["LaunchTemplate"]
        return _ready(template["LaunchTemplateId"], self._outputs(template))

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("ec2").delete_launch_template(LaunchTemplateId=observed.id)
        except ClientError as exc:
            if "NotFound" not in error_code(exc):
                raise


class InstanceProfile(Resource):
    """The nodes' IAM role and instance profile (PCS needs the AWSPCS name prefix or /aws-pcs/ path)."""

    kind = "instance_profile"

    def __init__(self, document: Document):
        self.key = document.key
        self.document = document
        self.role_name = document.body["role"]["RoleName"]
        self.profile_name = document.body["profile"]["InstanceProfileName"]

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        iam = ctx.client("iam")
        try:
            profile = iam.get_instance_profile(InstanceProfileName=self.profile_name)["InstanceProfile"]
        except ClientError as exc:
            if error_code(exc) == "NoSuchEntity":
                return None
            raise
        if not profile.get("Roles"):
            return Observed(profile["Arn"], "incomplete", "gone")  # half-made by a crash: create finishes it
        return _ready(profile["Arn"], {"instance_profile.arn": profile["Arn"]})

    def create(self, ctx: Context) -> Observed:
        iam = ctx.client("iam")
        body = self.document.body
        _tolerate(lambda: iam.create_role(**body["role"]), "EntityAlreadyExists")
        iam.put_role_policy(**body["inline_policy"])
        for arn in body["managed_policies"]:
            iam.attach_role_policy(RoleName=self.role_name, PolicyArn=arn)
        _tolerate(lambda: iam.create_instance_profile(**body["profile"]), "EntityAlreadyExists")
        _tolerate(lambda: iam.add_role_to_instance_profile(InstanceProfileName=self.profile_name,
                                                           RoleName=self.role_name), "LimitExceeded")
        arn = iam.get_instance_profile(InstanceProfileName=self.profile_name)["InstanceProfile"]["Arn"]
        return _ready(arn, {"instance_profile.arn": arn})

    def delete(self, ctx: Context, observed: Observed) -> None:
        iam = ctx.client("iam")
        _tolerate(lambda: iam.remove_role_from_instance_profile(InstanceProfileName=self.profile_name,
                                                                RoleName=self.role_name), "NoSuchEntity")
        _tolerate(lambda: iam.delete_instance_profile(InstanceProfileName=self.profile_name), "NoSuchEntity")
        for arn in self.document.body["managed_policies"]:
            _tolerate(lambda arn=arn: iam.detach_role_policy(RoleName=self.role_name, PolicyArn=arn), "NoSuchEntity")
        _tolerate(lambda: iam.delete_role_policy(RoleName=self.role_name,
                                                 PolicyName=self.document.body["inline_policy"]["PolicyName"]),
                  "NoSuchEntity")
        _tolerate(lambda: iam.delete_role(RoleName=self.role_name), "NoSuchEntity")


class NfsSecurityGroup(SecurityGroup):
    """The security group of a file system fmcluster creates for NFS clients in the VPC (OpenZFS): its
    ingress comes from the VPC's CIDR blocks, looked up at create time. Kept with the file system."""

    is_storage = True

    def create(self, ctx: Context) -> Observed:
        vpc = ctx.client("ec2").describe_vpcs(VpcIds=[self.vpc_id])["Vpcs"][0]
        blocks = [a["CidrBlock"] for a in vpc.get("CidrBlockAssociationSet") or []
                  if a.get("CidrBlockState", {}).get("State", "associated") == "associated"] or [vpc["CidrBlock"]]
        ctx.publish({"network.vpc_ip_ranges": [{"CidrIp": block, "Description": "NFS clients in the VPC"}
                                               for block in dict.fromkeys(blocks)]})
        return super().create(ctx)


_FSX_PHASES = {"AVAILABLE": "ready", "CREATING": "pending", "DELETING": "gone", "UPDATING": "ready",
               "FAILED": "failed", "MISCONFIGURED": "failed"}


class _FsxFileSystem(Resource):
    """An FSx file system found by its ``fmcluster:cluster`` tag and type; created with a client token."""

    file_system_type = ""
    is_storage = True

    def __init__(self, document: Document, cluster: str, depends_on: tuple[str, ...], token: str):
        self.key = document.key
        self.document = document
        self.cluster = cluster
        self.depends_on = depends_on
        self.token = token

    @abstractmethod
    def _outputs(self, fs: dict[str, Any]) -> dict[str, Any]:
        """The values other documents refer to (``${fsx_lustre.dns_name}``, …)."""

    def _find(self, ctx: Context, known_id: str | None) -> dict[str, Any] | None:
        fsx = ctx.client("fsx")
        for page in fsx.get_paginator("describe_file_systems").paginate():
            for fs in page["FileSystems"]:
                tags = {t["Key"]: t["Value"] for t in fs.get("Tags", [])}
                if fs["FileSystemId"] == known_id or (tags.get("fmcluster:cluster") == self.cluster
                                                      and fs["FileSystemType"] == self.file_system_type):
                    return fs
        return None

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        fs = self._find(ctx, known_id)
        if fs is None:
            return None
        state = fs.get("Lifecycle", "AVAILABLE")
        return Observed(fs["FileSystemId"], state, _FSX_PHASES.get(state, "pending"), self._outputs(fs),
                        fs.get("FailureDetails", {}).get("Message", ""))

    def create(self, ctx: Context) -> Observed:
        fs = ctx.client("fsx").create_file_system(ClientRequestToken=self.create_token(self.token),
                                                  **ctx.resolve(self.document.body))["FileSystem"]
        return Observed(fs["FileSystemId"], fs.get("Lifecycle", "CREATING"), "pending")

    def _delete_options(self) -> dict[str, Any]:
        return {}

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("fsx").delete_file_system(FileSystemId=observed.id, **self._delete_options())
        except ClientError as exc:
            if error_code(exc) != "FileSystemNotFound":
                raise


class FsxLustre(_FsxFileSystem):
    kind = "fsx_lustre"
    file_system_type = "LUSTRE"

    def _outputs(self, fs: dict[str, Any]) -> dict[str, Any]:
        lustre = fs.get("LustreConfiguration", {})
        return {"fsx_lustre.id": fs["FileSystemId"], "fsx_lustre.dns_name": fs.get("DNSName", ""),
                "fsx_lustre.mount_name": lustre.get("MountName", "")}


class FsxOpenZfs(_FsxFileSystem):
    """An FSx for OpenZFS file system (a cluster's /home). ParallelCluster mounts its root volume."""

    kind = "fsx_openzfs"
    file_system_type = "OPENZFS"

    def _outputs(self, fs: dict[str, Any]) -> dict[str, Any]:
        openzfs = fs.get("OpenZFSConfiguration", {})
        return {"fsx_openzfs.id": fs["FileSystemId"], "fsx_openzfs.dns_name": fs.get("DNSName", ""),
                "fsx_openzfs.root_volume_id": openzfs.get("RootVolumeId", "")}

    def _delete_options(self) -> dict[str, Any]:
        # `destroy` means the data goes (`--keep-storage` keeps the file system): no final backup left behind
        # untracked and billing; child volumes and snapshots go with the file system.
        return {"OpenZFSConfiguration": {"SkipFinalBackup": True,
                                         "Options": ["DELETE_CHILD_VOLUMES_AND_SNAPSHOTS"]}}


class FsxDataRepository(Resource):
    """A Lustre ↔ S3 link (lazy load from ``s3_import``, export to ``s3_export``)."""

    kind = "fsx_data_repository"
    is_storage = True

    def __init__(self, document: Document, token: str):
        self.key = document.key
        self.document = document
        self.token = token
        self.depends_on = ("fsx_lustre:lustre",)

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        fsx = ctx.client("fsx")
        if known_id:  # recorded by an earlier run (teardown reads it before the file system)
            try:
                found = fsx.describe_data_repository_associations(AssociationIds=[known_id])["Associations"]
            except ClientError as exc:
                if error_code(exc) != "DataRepositoryAssociationNotFound":
                    raise
                found = []
        else:
            file_system = ctx.values.get("fsx_lustre.id")
            if not file_system:
                return None
            found = fsx.describe_data_repository_associations(
                Filters=[{"Name": "file-system-id", "Values": [file_system]}])["Associations"]
        for association in found:
            if association["DataRepositoryPath"] == self.document.body["DataRepositoryPath"] and \
                    association.get("FileSystemPath") == self.document.body["FileSystemPath"]:
                state = association.get("Lifecycle", "AVAILABLE")
                phase = {"AVAILABLE": "ready", "CREATING": "pending", "DELETING": "gone", "FAILED": "failed",
                         "MISCONFIGURED": "failed"}.get(state, "pending")
                return Observed(association["AssociationId"], state, phase, {},
                                association.get("FailureDetails", {}).get("Message", ""))
        return None

    def create(self, ctx: Context) -> Observed:
        association = ctx.client("fsx").create_data_repository_association(
            ClientRequestToken=self.create_token(self.token), **ctx.resolve(self.document.body))["Association"]
        return Observed(association["AssociationId"], association.get("Lifecycle", "CREATING"), "pending")

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("fsx").delete_data_repository_association(AssociationId=observed.id,
                                                                 DeleteDataInFileSystem=False)
        except ClientError as exc:
            if error_code(exc) != "DataRepositoryAssociationNotFound":
                raise


def _tolerate(call: Any, *codes: str) -> None:
    try:
        call()
    except ClientError as exc:
        if error_code(exc) not in codes:
            raise
