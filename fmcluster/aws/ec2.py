"""EC2 resources a cluster needs around its scheduler: security groups, placement groups, launch templates.

Each finds itself by name, adopts only what carries this cluster's ownership tags, and reads back every part
a crash could leave unmade (a group's rules, a template's version), so a re-run repairs it.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from fmcluster.aws.ownership import require_ours, tag_dict
from fmcluster.engine import UNKNOWN, AttributeChange, Context, Observed, Resource, Unknown, flatten, reads
from fmcluster.engine.waiting import pause
from fmcluster.render.documents import Document


def error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


def tolerate(call: Any, *codes: str) -> Any:
    """Make ``call``; an AWS error with one of ``codes`` (already done, already gone) is not a failure."""
    try:
        return call()
    except ClientError as exc:
        if error_code(exc) not in codes:
            raise
        return None


# -- security groups ------------------------------------------------------------------------------
def _atoms(permissions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """IpPermissions → one entry per (protocol, ports, source), each a permission that grants only it.
    Descriptions do not make rules different; AWS merges rules with equal sources."""
    atoms: dict[str, dict[str, Any]] = {}
    for permission in permissions:
        protocol = str(permission.get("IpProtocol", "-1"))
        ports = "" if protocol == "-1" else f"{permission.get('FromPort')}-{permission.get('ToPort')}"
        base = {k: permission[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in permission}
        for field, value_key in (("IpRanges", "CidrIp"), ("Ipv6Ranges", "CidrIpv6"),
                                 ("UserIdGroupPairs", "GroupId"), ("PrefixListIds", "PrefixListId")):
            for source in permission.get(field) or []:
                value = source.get(value_key)
                atoms[f"{protocol} {ports} {value}".replace("  ", " ")] = {**base, field: [source]}
    return atoms


class SecurityGroup(Resource):
    """A security group and its rules (ingress and egress, compared rule by rule)."""

    kind = "security_group"
    teardown_rank = 90
    replace_on = ("GroupName", "Description", "VpcId")

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        self.key = key
        self.document = document
        self.known_id = known_id

    def _outputs(self, group: dict[str, Any]) -> dict[str, Any]:
        return {f"security_group.{self.key}.id": group["GroupId"]}

    def _find(self, ctx: Context, known_id: str | None) -> dict[str, Any] | None:
        ec2 = ctx.client("ec2")
        listed = reads.kept(ctx, "ec2.SecurityGroups", known_id)  # what discovery listed in this read-only pass
        if listed is not reads.MISSING and listed is not None:
            return listed
        if known_id:
            try:
                return ec2.describe_security_groups(GroupIds=[known_id])["SecurityGroups"][0]
            except ClientError as exc:
                if error_code(exc) != "InvalidGroup.NotFound":
                    raise
            if self.document is None:
                return None
        if self.document is None:
            return None
        create = ctx.resolve(self.document.body["create"], partial=True)
        filters = [{"Name": "group-name", "Values": [create["GroupName"]]}]
        if not isinstance(create.get("VpcId"), Unknown):
            filters.append({"Name": "vpc-id", "Values": [create["VpcId"]]})
        groups = ec2.describe_security_groups(Filters=filters)["SecurityGroups"]
        return groups[0] if groups else None

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        group = self._find(ctx, known_id or self.known_id)
        if group is None:
            return None
        require_ours(f"security group {group['GroupId']} ({group['GroupName']})", tag_dict(group.get("Tags")), ctx)
        attributes = {"GroupName": group["GroupName"], "Description": group.get("Description"),
                      "VpcId": group.get("VpcId"),
                      "ingress": sorted(_atoms(group.get("IpPermissions") or [])),
                      "egress": sorted(_atoms(group.get("IpPermissionsEgress") or []))}
        return Observed(group["GroupId"], "available", "ready", self._outputs(group), attributes=attributes)

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = self.document.body
        create = ctx.resolve(body["create"], partial=True)
        wanted = {"GroupName": create["GroupName"], "Description": create["Description"], "VpcId": create["VpcId"]}
        for section in ("ingress", "egress"):
            permissions = ctx.resolve(body[section]["IpPermissions"], partial=True)
            wanted[section] = sorted(_atoms(permissions)) if _known(permissions) else UNKNOWN
        return wanted

    def create(self, ctx: Context, token: str) -> Observed:
        ec2 = ctx.client("ec2")
        request = ctx.resolve(self.document.body["create"])
        group_id = ec2.create_security_group(**request)["GroupId"]
        ctx.publish({f"security_group.{self.key}.id": group_id})
        self._sync_rules(ctx, group_id)
        return self.read(ctx, group_id) or Observed(group_id, "available", "ready", {})

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        self._sync_rules(ctx, observed.id)
        return self.read(ctx, observed.id) or observed

    def _sync_rules(self, ctx: Context, group_id: str | None) -> None:
        """Authorize the rules the document has and AWS lacks; revoke those AWS has and the document does not
        (including the default egress rule when the document does not keep it)."""
        ec2 = ctx.client("ec2")
        ctx.publish({f"security_group.{self.key}.id": group_id})
        group = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
        for section, live_key, authorize, revoke in (
                ("ingress", "IpPermissions", ec2.authorize_security_group_ingress,
                 ec2.revoke_security_group_ingress),
                ("egress", "IpPermissionsEgress", ec2.authorize_security_group_egress,
                 ec2.revoke_security_group_egress)):
            wanted = _atoms(ctx.resolve(self.document.body[section]["IpPermissions"]))
            live = _atoms(group.get(live_key) or [])
            missing = [wanted[a] for a in wanted if a not in live]
            extra = [live[a] for a in live if a not in wanted]
            if missing:
                tolerate(lambda m=missing, call=authorize: call(GroupId=group_id, IpPermissions=m),
                         "InvalidPermission.Duplicate")
            if extra:
                tolerate(lambda e=extra, call=revoke: call(GroupId=group_id, IpPermissions=e),
                         "InvalidPermission.NotFound")

    def delete(self, ctx: Context, observed: Observed) -> None:
        ec2 = ctx.client("ec2")
        # Network interfaces of terminating instances hold the group for a while after they are gone.
        for _ in range(90):
            try:
                ec2.delete_security_group(GroupId=observed.id)
                return
            except ClientError as exc:
                if error_code(exc) == "InvalidGroup.NotFound":
                    return
                if error_code(exc) != "DependencyViolation":
                    raise
                pause(2, ctx.stop)
        ec2.delete_security_group(GroupId=observed.id)  # still in use: let AWS's error say by what


def _known(value: Any) -> bool:
    if isinstance(value, Unknown):
        return False
    if isinstance(value, dict):
        return all(_known(v) for v in value.values())
    if isinstance(value, list):
        return all(_known(v) for v in value)
    return True


# -- placement groups -----------------------------------------------------------------------------
class PlacementGroup(Resource):
    kind = "placement_group"
    teardown_rank = 60
    replace_on = ("GroupName", "Strategy")

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        self.key = key
        self.document = document
        self.known_id = known_id

    def _name(self, known_id: str | None) -> str | None:
        if self.document is not None:
            return self.document.body["GroupName"]
        return known_id

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        name = self._name(known_id or self.known_id)
        if name is None:
            return None
        listed = reads.kept(ctx, "ec2.PlacementGroups", name)  # what discovery listed in this read-only pass
        try:
            groups = [listed] if listed is not reads.MISSING and listed is not None else \
                ctx.client("ec2").describe_placement_groups(GroupNames=[name])["PlacementGroups"]
        except ClientError as exc:
            if error_code(exc) in ("InvalidPlacementGroup.Unknown", "InvalidGroup.NotFound"):
                return None
            raise
        groups = [g for g in groups if g.get("State") != "deleted"]
        if not groups:
            return None
        group = groups[0]
        require_ours(f"placement group {name}", tag_dict(group.get("Tags")), ctx)
        state = group.get("State", "available")
        phase = "ready" if state == "available" else ("gone" if state == "deleting" else "pending")
        # The group's name is its id for everything that uses it (launch templates, deletes).
        return Observed(name, state, phase, {f"placement_group.{self.key}.name": name},
                        attributes={"GroupName": name, "Strategy": group.get("Strategy")})

    def desired(self, ctx: Context) -> dict[str, Any]:
        return {"GroupName": self.document.body["GroupName"], "Strategy": self.document.body["Strategy"]}

    def create(self, ctx: Context, token: str) -> Observed:
        ctx.client("ec2").create_placement_group(**ctx.resolve(self.document.body))
        name = self.document.body["GroupName"]
        return Observed(name, "pending", "pending", {f"placement_group.{self.key}.name": name})

    def delete(self, ctx: Context, observed: Observed) -> None:
        tolerate(lambda: ctx.client("ec2").delete_placement_group(GroupName=observed.id),
                 "InvalidPlacementGroup.Unknown")


# -- launch templates -----------------------------------------------------------------------------
def template_version(ctx: Context, template_id: str, version: int | str) -> dict[str, Any] | None:
    """One version of a launch template (None: it has no such version), read once per read-only pass: the template
    and the EKS node group that launches from it both read it."""
    def fetch() -> dict[str, Any] | None:
        versions = ctx.client("ec2").describe_launch_template_versions(
            LaunchTemplateId=template_id, Versions=[str(version)])["LaunchTemplateVersions"]
        return versions[0] if versions else None

    return reads.once(ctx, "ec2.LaunchTemplateVersions", f"{template_id}:{version}", fetch)


class LaunchTemplate(Resource):
    """A launch template. A change to what it launches is a new version (PCS node groups name the version
    they use, so they follow it with an update of their own)."""

    kind = "launch_template"
    teardown_rank = 60
    replace_on = ("LaunchTemplateName",)
    reissued_by_update = ("version",)  # each change is a new version

    def __init__(self, key: str, document: Document | None = None, known_id: str | None = None):
        self.key = key
        self.document = document
        self.known_id = known_id

    def _outputs(self, template: dict[str, Any]) -> dict[str, Any]:
        return {f"launch_template.{self.key}.id": template["LaunchTemplateId"],
                f"launch_template.{self.key}.version": str(template["LatestVersionNumber"])}

    def read(self, ctx: Context, known_id: str | None) -> Observed | None:
        ec2 = ctx.client("ec2")
        known_id = known_id or self.known_id
        if known_id:
            query: dict[str, Any] = {"LaunchTemplateIds": [known_id]}
        elif self.document is not None:
            query = {"LaunchTemplateNames": [self.document.body["LaunchTemplateName"]]}
        else:
            return None
        # What discovery listed in this read-only pass, by the id or the name asked for.
        listed = reads.kept(ctx, "ec2.LaunchTemplates", next(iter(query.values()))[0])
        try:
            templates = [listed] if listed is not reads.MISSING and listed is not None else \
                ec2.describe_launch_templates(**query)["LaunchTemplates"]
        except ClientError as exc:
            if error_code(exc) in ("InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound",
                                   "InvalidLaunchTemplateId.Malformed"):
                return None
            raise
        if not templates:
            return None
        template = templates[0]
        require_ours(f"launch template {template['LaunchTemplateId']} ({template['LaunchTemplateName']})",
                     tag_dict(template.get("Tags")), ctx)
        attributes: dict[str, Any] = {"LaunchTemplateName": template["LaunchTemplateName"]}
        missing: list[str] = []
        if self.document is not None:
            version = template_version(ctx, template["LaunchTemplateId"], template["LatestVersionNumber"])
            if version is not None:
                attributes.update(flatten(version.get("LaunchTemplateData") or {}, "LaunchTemplateData"))
            else:  # a crash between creating the template and its version
                missing.append(f"version {template['LatestVersionNumber']}")
        return Observed(template["LaunchTemplateId"], "available", "ready", self._outputs(template),
                        attributes=attributes, missing=missing)

    def desired(self, ctx: Context) -> dict[str, Any]:
        body = ctx.resolve(self.document.body, partial=True)
        return {"LaunchTemplateName": body["LaunchTemplateName"],
                **flatten(body["LaunchTemplateData"], "LaunchTemplateData")}

    def create(self, ctx: Context, token: str) -> Observed:
        request = ctx.resolve(self.document.body)
        template = ctx.client("ec2").create_launch_template(ClientToken=token, **request)["LaunchTemplate"]
        return Observed(template["LaunchTemplateId"], "available", "ready", self._outputs(template))

    def update(self, ctx: Context, observed: Observed, changes: list[AttributeChange], token: str) -> Observed:
        request = ctx.resolve(self.document.body)
        ec2 = ctx.client("ec2")
        ec2.create_launch_template_version(
            ClientToken=token, LaunchTemplateId=observed.id, LaunchTemplateData=request["LaunchTemplateData"],
            VersionDescription=request.get("VersionDescription", "rendered by fmcluster"))
        return self.read(ctx, observed.id) or observed

    def delete(self, ctx: Context, observed: Observed) -> None:
        try:
            ctx.client("ec2").delete_launch_template(LaunchTemplateId=observed.id)
        except ClientError as exc:
            if "NotFound" not in error_code(exc):
                raise
